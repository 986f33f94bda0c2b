-- Live generations by status, for the metrics scrape: the partial index
-- holds only reserved, queued and running rows, so counting them does not
-- scan the finished ones.
CREATE INDEX generations_live ON generations (status)
    WHERE status IN ('reserved', 'queued', 'running');
