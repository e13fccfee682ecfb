-- The kevo run store, SQLite dialect. Keep in step with ../postgres/0001_runs.sql:
-- same tables, columns, constraints and indexes; only the types differ.
--
-- Tables are STRICT so a value of the wrong type is an error, not silently
-- stored. Timestamps are RFC 3339 text in UTC, JSON columns hold serde_json
-- text, booleans are 0/1.

-- One evolutionary run of one task on one device.
CREATE TABLE runs (
    id            TEXT    NOT NULL PRIMARY KEY,
    created_at    TEXT    NOT NULL,
    task          TEXT    NOT NULL,
    backend       TEXT    NOT NULL,
    device        TEXT    NOT NULL,
    size_set      TEXT    NOT NULL,
    strategy      TEXT    NOT NULL,
    -- Model specs, iteration budget, token/cost budgets, seeds: everything
    -- needed to understand or repeat the run.
    config        TEXT    NOT NULL,
    status        TEXT    NOT NULL
                  CHECK (status IN ('running', 'finished', 'failed', 'interrupted')),
    -- Why the run failed or was interrupted, when it did.
    status_reason TEXT,
    -- The generator state the run started from; the latest state is in steps.
    rng_state     TEXT,
    finished_at   TEXT,
    summary       TEXT
) STRICT;

CREATE INDEX runs_created_at ON runs (created_at);
CREATE INDEX runs_task ON runs (task, created_at);

-- Every kernel source the run considered, the seed included (iteration 0).
-- island and cell are where a population strategy placed it (NULL for (1+1)).
CREATE TABLE candidates (
    id            INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    run_id        TEXT    NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    iteration     INTEGER NOT NULL CHECK (iteration >= 0),
    island        INTEGER,
    -- Descriptor key of the MAP-Elites cell, e.g. "2-1-3".
    cell          TEXT,
    -- Behaviour descriptors (memory pattern, structure, ...) as found.
    descriptors   TEXT,
    source        TEXT    NOT NULL,
    source_sha256 TEXT    NOT NULL CHECK (length(source_sha256) = 64),
    provider      TEXT,
    model         TEXT,
    created_at    TEXT    NOT NULL
) STRICT;

CREATE INDEX candidates_run_iteration ON candidates (run_id, iteration);
CREATE INDEX candidates_run_sha256 ON candidates (run_id, source_sha256);
CREATE INDEX candidates_run_cell ON candidates (run_id, island, cell);

-- Parents in the order the strategy gave them (crossover may have several;
-- a parent may belong to another run when a run is seeded from an earlier one).
CREATE TABLE candidate_parents (
    candidate_id  INTEGER NOT NULL REFERENCES candidates (id) ON DELETE CASCADE,
    position      INTEGER NOT NULL CHECK (position >= 0),
    parent_id     INTEGER NOT NULL REFERENCES candidates (id),
    PRIMARY KEY (candidate_id, position)
) STRICT;

CREATE INDEX candidate_parents_parent ON candidate_parents (parent_id);

-- Every request to a language model, failed ones included, with what it cost.
-- Token counts and cost are NULL when the provider did not report them.
CREATE TABLE llm_calls (
    id               INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    run_id           TEXT    NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    candidate_id     INTEGER REFERENCES candidates (id) ON DELETE CASCADE,
    iteration        INTEGER NOT NULL CHECK (iteration >= 0),
    -- What the call was for: 'propose' today; analysis or meta-prompt calls later.
    purpose          TEXT    NOT NULL,
    provider         TEXT    NOT NULL,
    model            TEXT    NOT NULL,
    prompt_system    TEXT    NOT NULL,
    prompt_user      TEXT    NOT NULL,
    response         TEXT,
    reasoning        TEXT,
    input_tokens     INTEGER CHECK (input_tokens >= 0),
    output_tokens    INTEGER CHECK (output_tokens >= 0),
    reasoning_tokens INTEGER CHECK (reasoning_tokens >= 0),
    cost_usd         REAL,
    latency_s        REAL    NOT NULL,
    error            TEXT,
    created_at       TEXT    NOT NULL
) STRICT;

CREATE INDEX llm_calls_run_iteration ON llm_calls (run_id, iteration);
CREATE INDEX llm_calls_candidate ON llm_calls (candidate_id);

-- The evaluator's verdict on a candidate. `evaluation` is the full
-- kevo_eval::Evaluation; outcome_kind and score are copied out for queries.
CREATE TABLE evaluations (
    id            INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    candidate_id  INTEGER NOT NULL REFERENCES candidates (id) ON DELETE CASCADE,
    kind          TEXT    NOT NULL CHECK (kind IN ('in_distribution', 'held_out')),
    outcome_kind  TEXT    NOT NULL,
    -- The hard gate: only a correct candidate has a score.
    score         REAL    CHECK (score IS NULL OR outcome_kind = 'correct'),
    device        TEXT    NOT NULL,
    backend       TEXT    NOT NULL,
    evaluation    TEXT    NOT NULL,
    -- Set when this row copies an earlier evaluation of the same source
    -- instead of measuring again, so copies never count as new measurements.
    reused_from   INTEGER REFERENCES evaluations (id),
    created_at    TEXT    NOT NULL
) STRICT;

CREATE INDEX evaluations_candidate ON evaluations (candidate_id);
-- A candidate is scored on the in-distribution sizes once.
CREATE UNIQUE INDEX evaluations_one_in_distribution
    ON evaluations (candidate_id) WHERE kind = 'in_distribution';

-- What the strategy did with each proposal. candidate_id is NULL for a
-- skipped proposal (model error, nothing extracted). island/cell say which
-- incumbent the decision is about, for strategies with more than one.
CREATE TABLE decisions (
    id            INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    run_id        TEXT    NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    iteration     INTEGER NOT NULL CHECK (iteration >= 0),
    candidate_id  INTEGER REFERENCES candidates (id) ON DELETE CASCADE,
    island        INTEGER,
    cell          TEXT,
    promoted      INTEGER NOT NULL CHECK (promoted IN (0, 1)),
    incumbent_id  INTEGER REFERENCES candidates (id),
    reason        TEXT    NOT NULL,
    created_at    TEXT    NOT NULL,
    CHECK (promoted = 0 OR candidate_id IS NOT NULL)
) STRICT;

CREATE INDEX decisions_run_iteration ON decisions (run_id, iteration);
CREATE UNIQUE INDEX decisions_candidate ON decisions (candidate_id);

-- The last completed step of a run, one row per iteration: where `resume`
-- continues from. Spent figures are cumulative over the run.
CREATE TABLE steps (
    run_id           TEXT    NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    iteration        INTEGER NOT NULL CHECK (iteration >= 0),
    incumbent_id     INTEGER REFERENCES candidates (id),
    previous_id      INTEGER REFERENCES candidates (id),
    rng_state        TEXT,
    -- Whatever else the strategy needs to continue (archive, islands, ...).
    strategy_state   TEXT,
    input_tokens     INTEGER NOT NULL CHECK (input_tokens >= 0),
    output_tokens    INTEGER NOT NULL CHECK (output_tokens >= 0),
    reasoning_tokens INTEGER NOT NULL CHECK (reasoning_tokens >= 0),
    cost_usd         REAL    NOT NULL,
    wall_s           REAL    NOT NULL,
    created_at       TEXT    NOT NULL,
    PRIMARY KEY (run_id, iteration)
) STRICT;

-- The end-of-run score on the held-out size. Rows evaluated together share
-- a session, because only fractions measured in one session compare.
CREATE TABLE held_out_results (
    id            INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    run_id        TEXT    NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    candidate_id  INTEGER NOT NULL REFERENCES candidates (id) ON DELETE CASCADE,
    -- 'seed' or 'winner' (later perhaps one elite per cell).
    role          TEXT    NOT NULL,
    evaluation_id INTEGER NOT NULL REFERENCES evaluations (id) ON DELETE CASCADE,
    session       TEXT,
    -- Fraction of ceiling times correctness (0 when wrong).
    phi           REAL,
    fraction      REAL,
    -- This candidate's fraction over the seed's, in the same session.
    speedup       REAL,
    created_at    TEXT    NOT NULL
) STRICT;

CREATE INDEX held_out_results_run ON held_out_results (run_id);
