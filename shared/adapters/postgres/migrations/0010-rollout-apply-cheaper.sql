-- rollout_apply: the same transition for less server time
-- Migration 3's function, statement for statement, made cheaper where it
-- measured: arrays are walked by index (no query to list their elements),
-- no statement runs for an empty list, and timestamps are read with ->>
-- (rollout_ts compared and re-extracted each value). Same checks, same order, all or nothing.

--! include functions/rollout_apply.sql
