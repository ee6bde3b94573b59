-- ledger: when each pending item was last sent to the queue

-- Storing a change and sending its message are two steps: a Pending item whose message was
-- never recorded as sent (NULL) is re-sent by the coordinator's scan. Items pending before this
-- migration count as unsent and are sent once more (a duplicate message is harmless).
ALTER TABLE work_items ADD COLUMN sent_at timestamptz;
CREATE INDEX work_items_unsent ON work_items (run_id, sent_at NULLS FIRST) WHERE state = 'pending';
