-- A run's final pick is confirmed against the seed on fresh rounds
-- (purpose 'confirm'). Keep in step with
-- ../sqlite/0009_remeasurement_confirm.sql.
ALTER TABLE remeasurements DROP CONSTRAINT IF EXISTS remeasurements_purpose_check;
ALTER TABLE remeasurements ADD CONSTRAINT remeasurements_purpose_check
    CHECK (purpose IN ('promotion', 'final', 'confirm'));
