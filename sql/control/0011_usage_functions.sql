-- Lambda usage per function: invocations and billed milliseconds x memory MB.
CREATE TABLE usage_functions (
    day         date NOT NULL,
    retailer_id text NOT NULL,
    function    text NOT NULL,
    invocations bigint NOT NULL DEFAULT 0,
    mb_ms       bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (day, retailer_id, function)
);
