-- The process that writes a running run's heartbeat (boot id, pid, start
-- time; see src/lease.rs), so a run whose process died on this machine is
-- known dead at once rather than after the heartbeat goes stale. Keep in
-- step with ../sqlite/0003_heartbeat_holder.sql.
ALTER TABLE runs ADD COLUMN heartbeat_holder TEXT;
