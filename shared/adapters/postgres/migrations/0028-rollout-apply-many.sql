-- rollout_apply_many: a tick's transitions in one round trip, each still rollout_apply's own fenced conditional write
-- A tick that promotes a thousand rollouts sent a thousand statements: each a round trip, a transaction, and a
-- FOR SHARE of the one lease row beside fifteen other transactions holding it (a new multixact each time).
-- Transitions decided at once now go together, each in a subtransaction of its own so one that finds its stage
-- moved is undone without the rest.

--! include functions/rollout_apply_many.sql
