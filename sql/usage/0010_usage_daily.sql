-- Usage per retailer per UTC day (DESIGN 10), the same table in the control
-- database and in every shard (package sql embeds this file in both):
--   - on a shard, what the pipeline counts in its own transactions: the
--     diff's state change (uploads, bytes, rows received, rows changed by
--     kind) and each chunk's apply transaction (chunks, database rows
--     written), so a counter moves if and only if its work committed, and
--     once: a duplicate delivery of a chunk commits nothing;
--   - on the control database, what the functions count in memory and add in
--     batches: storefront reads, API requests, S3/SQS/SNS requests (Lambda
--     time per function is in control's usage_functions).
-- The cost report sums both (pgstore.Stores.Usage).
CREATE TABLE usage_daily (
    day                   date NOT NULL,
    retailer_id           text NOT NULL,
    uploads               bigint NOT NULL DEFAULT 0,
    bytes_uploaded        bigint NOT NULL DEFAULT 0,
    rows_received         bigint NOT NULL DEFAULT 0,
    rows_inserted         bigint NOT NULL DEFAULT 0,
    rows_updated          bigint NOT NULL DEFAULT 0,
    rows_deleted          bigint NOT NULL DEFAULT 0,
    chunks                bigint NOT NULL DEFAULT 0,
    db_rows_written       bigint NOT NULL DEFAULT 0,
    reads                 bigint NOT NULL DEFAULT 0,
    read_bytes            bigint NOT NULL DEFAULT 0,
    api_requests          bigint NOT NULL DEFAULT 0,
    s3_class_a            bigint NOT NULL DEFAULT 0,
    s3_class_b            bigint NOT NULL DEFAULT 0,
    s3_byte_days          bigint NOT NULL DEFAULT 0,
    sqs_standard_requests bigint NOT NULL DEFAULT 0,
    sqs_fifo_requests     bigint NOT NULL DEFAULT 0,
    sns_requests          bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (day, retailer_id)
);
