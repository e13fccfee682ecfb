-- An answer told without evaluating it (`kevo tell --defer`): kept with its
-- pending proposal until a host with the run's device records it as an
-- iteration (`kevo tell --deferred`), so the store can travel between a
-- coordinator without a GPU and an evaluation host without a network path
-- to it. `answer_model` says who answered; `told_at` when. Keep in step
-- with ../sqlite/0010_deferred_answers.sql.
ALTER TABLE proposals ADD COLUMN answer TEXT;
ALTER TABLE proposals ADD COLUMN answer_model TEXT;
ALTER TABLE proposals ADD COLUMN told_at TIMESTAMPTZ;
