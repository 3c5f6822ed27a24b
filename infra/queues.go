package main

import (
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3notifications"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// Function timeouts; the queue visibility timeouts derive from them.
const (
	uploadTimeout  = 29 * time.Second // API Gateway HTTP API integration limit is 30 s
	readTimeout    = 10 * time.Second
	arrivalTimeout = 30 * time.Second
	diffTimeout    = 15 * time.Minute
	applyTimeout   = 2 * time.Minute
	// visibilityFactor: AWS recommends a visibility timeout of at least six
	// times the function timeout for SQS event sources.
	visibilityFactor = 6
)

// Redrive and retention settings.
const (
	arrivalMaxReceiveCount = 5 // an arrival is a row update and a send
	diffMaxReceiveCount    = 3 // a diff is long; three full attempts, then the DLQ
	applyMaxReceiveCount   = 5 // chunk batches are short and idempotent
	queueRetention         = 4 * 24 * time.Hour
	dlqRetention           = dlqRetentionDays * 24 * time.Hour // the SQS maximum, time to replay
	dlqRetentionDays       = 14
)

// queues holds the arrivals queue, the diff job FIFO queue, the two apply
// FIFO queues and their DLQs.
type queues struct {
	arrivals, arrivalsDLQ           awssqs.Queue
	diffJobs, diffDLQ               awssqs.Queue
	applySmall, applySmallDLQ       awssqs.Queue
	applyLarge, applyLargeDLQ       awssqs.Queue
	dlqs                            map[string]awssqs.Queue // name -> DLQ, for alarms
	work                            map[string]awssqs.Queue // name -> work queue, for alarms
	arrivalVisibility               time.Duration
	diffVisibility, applyVisibility time.Duration
}

func dur(d time.Duration) awscdk.Duration {
	if d%time.Minute == 0 {
		return awscdk.Duration_Minutes(jsii.Number(d.Minutes()))
	}
	return awscdk.Duration_Seconds(jsii.Number(d.Seconds()))
}

// standardQueue makes the standard (not FIFO) queue <stackName>-<name>,
// SSE-SQS encrypted and TLS only; visibility 0 keeps the SQS default, a nil
// dlq makes none.
func standardQueue(scope constructs.Construct, stackName, id, name string, visibility, retention time.Duration, dlq *awssqs.DeadLetterQueue) awssqs.Queue {
	props := &awssqs.QueueProps{
		QueueName:       jsii.String(stackName + "-" + name),
		Encryption:      awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:      jsii.Bool(true),
		RetentionPeriod: dur(retention),
		DeadLetterQueue: dlq,
	}
	if visibility > 0 {
		props.VisibilityTimeout = dur(visibility)
	}
	return awssqs.NewQueue(scope, jsii.String(id), props)
}

func newQueues(scope constructs.Construct, stackName string, bucket awss3.Bucket) *queues {
	q := &queues{
		arrivalVisibility: visibilityFactor * arrivalTimeout,
		diffVisibility:    visibilityFactor * diffTimeout,
		applyVisibility:   visibilityFactor * applyTimeout,
	}
	fifo := func(id, name string, visibility, retention time.Duration, dlq *awssqs.DeadLetterQueue) awssqs.Queue {
		props := &awssqs.QueueProps{
			QueueName:       jsii.String(stackName + "-" + name + ".fifo"),
			Fifo:            jsii.Bool(true),
			Encryption:      awssqs.QueueEncryption_SQS_MANAGED,
			EnforceSSL:      jsii.Bool(true),
			RetentionPeriod: dur(retention),
			// High-throughput FIFO: deduplication and throughput per
			// message group (MessageGroupId = retailer#(seq mod cap)).
			FifoThroughputLimit: awssqs.FifoThroughputLimit_PER_MESSAGE_GROUP_ID,
			DeduplicationScope:  awssqs.DeduplicationScope_MESSAGE_GROUP,
			// The diff sets MessageDeduplicationId = retailer:generation:seq.
			ContentBasedDeduplication: jsii.Bool(false),
			DeadLetterQueue:           dlq,
		}
		if visibility > 0 {
			props.VisibilityTimeout = dur(visibility)
		}
		return awssqs.NewQueue(scope, jsii.String(id), props)
	}

	q.arrivalsDLQ = standardQueue(scope, stackName, "ArrivalsDLQ", "arrivals-dlq", 0, dlqRetention, nil)
	q.arrivals = standardQueue(scope, stackName, "ArrivalsQueue", "arrivals", q.arrivalVisibility, queueRetention,
		&awssqs.DeadLetterQueue{Queue: q.arrivalsDLQ, MaxReceiveCount: jsii.Number(arrivalMaxReceiveCount)})

	// One message group per retailer (message.DiffJobGroupID): SQS hands out
	// one diff job of a retailer at a time, so one retailer never has two
	// diffs running, and a group with a backlog does not hold up other
	// groups: every diff worker takes the next job of a group that is free.
	q.diffDLQ = fifo("DiffJobsDLQ", "diff-jobs-dlq", 0, dlqRetention, nil)
	q.diffJobs = fifo("DiffJobsQueue", "diff-jobs", q.diffVisibility, queueRetention,
		&awssqs.DeadLetterQueue{Queue: q.diffDLQ, MaxReceiveCount: jsii.Number(diffMaxReceiveCount)})

	q.applySmallDLQ = fifo("ApplySmallDLQ", "apply-small-dlq", 0, dlqRetention, nil)
	q.applySmall = fifo("ApplySmallQueue", "apply-small", q.applyVisibility, queueRetention,
		&awssqs.DeadLetterQueue{Queue: q.applySmallDLQ, MaxReceiveCount: jsii.Number(applyMaxReceiveCount)})

	q.applyLargeDLQ = fifo("ApplyLargeDLQ", "apply-large-dlq", 0, dlqRetention, nil)
	q.applyLarge = fifo("ApplyLargeQueue", "apply-large", q.applyVisibility, queueRetention,
		&awssqs.DeadLetterQueue{Queue: q.applyLargeDLQ, MaxReceiveCount: jsii.Number(applyMaxReceiveCount)})

	q.dlqs = map[string]awssqs.Queue{"arrivals": q.arrivalsDLQ, "diff-jobs": q.diffDLQ, "apply-small": q.applySmallDLQ, "apply-large": q.applyLargeDLQ}
	q.work = map[string]awssqs.Queue{"arrivals": q.arrivals, "diff-jobs": q.diffJobs, "apply-small": q.applySmall, "apply-large": q.applyLarge}

	// Step 3 of DESIGN 2: every object created under snapshots/ starts a
	// diff, through the arrival function: S3 cannot notify a FIFO queue,
	// hence the standard arrivals queue, from which the arrival function
	// records the upload and queues its job in the retailer's group of
	// diff-jobs.fifo (docs/ARCHITECTURE.md, "Diff fairness").
	bucket.AddEventNotification(awss3.EventType_OBJECT_CREATED,
		awss3notifications.NewSqsDestination(q.arrivals),
		&awss3.NotificationKeyFilter{Prefix: jsii.String(prefixSnapshots)})
	return q
}
