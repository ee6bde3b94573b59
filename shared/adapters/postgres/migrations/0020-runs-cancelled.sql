-- runs_cancelled: who cancelled a run, when and why

ALTER TABLE runs ADD COLUMN cancelled_at timestamptz, ADD COLUMN cancelled_by text, ADD COLUMN cancel_reason text;
