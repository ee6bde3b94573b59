-- consecutiveSuccesses: a gate's passes in a row, ending with its newest reading (0 when that did not pass).
-- A tally stored before has its newest reading stand for a streak of one when it passed.

ALTER TABLE gate_tallies ADD COLUMN pass_streak integer NOT NULL DEFAULT 0;
UPDATE gate_tallies SET pass_streak = 1 WHERE last->>'outcome' = 'pass';
