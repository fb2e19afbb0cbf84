-- Bench setup only (verify): break the schema as a faulty build would, so a duplicate and an
-- early run can be planted; a plain index takes the UNIQUE one's place, so the checker's plan
-- (and so its time) stays what it is on a sound schema.
ALTER TABLE ql3.runs
    DROP CONSTRAINT runs_occurrence_unique,
    DROP CONSTRAINT runs_not_early
