-- QL3 schema, version 3 (DESIGN §8, §9): what the database itself refuses in a schedule
-- definition, the quarantine of a row that no replica can read, and the zone rules every replica
-- must share. Runs as ql3_owner, like every migration; grants ship with the objects they cover.
--
-- Every CHECK below holds for every row the application could write before this version (it
-- validated cron and zone with croniter and zoneinfo), except a node-relative zone (`localtime`)
-- and a grace above 7 days: such a row makes this migration fail naming the constraint; fix the
-- row (`ql3 schedule apply`) and migrate again (packages/cluster-control/README.md, Upgrading).

-- 1. Definitions the database refuses -------------------------------------------------------------

-- A cron expression is 5 or 6 fields separated by single spaces (the admin stores it normalized),
-- or one `@nickname`, built only of the characters some accepted dialect ever used: digits,
-- letters (month/day names), * ? , / - # ( ). Whatever the dialect refuses beyond that shape
-- (`R`, `L`, a value out of range, ...) is refused by the application and, written past it, is
-- quarantined at its first claim. 1 000 characters: listing every value of all six fields, names
-- included, takes about 600.
ALTER TABLE ql3.trigger_schedules
    ADD CONSTRAINT trigger_schedules_cron_shape CHECK (
        length(cron) BETWEEN 1 AND 1000
        AND cron ~ '^(@[A-Za-z]{3,16}|[0-9A-Za-z*?,/#()-]+( [0-9A-Za-z*?,/#()-]+){4,5})$'
    );

-- An IANA key: letters first, then letters, digits, _ + - in /-separated parts. No leading /, no
-- dot at all (so no `..`), no space, and never `localtime`, which names each node's own zone
-- (rule zero: no node decides with rules of its own). 64 characters: the longest IANA name has 32.
ALTER TABLE ql3.trigger_schedules
    ADD CONSTRAINT trigger_schedules_timezone_shape CHECK (
        length(timezone) BETWEEN 1 AND 64
        AND timezone ~ '^[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+)*$'
        AND lower(timezone) <> 'localtime'
    );

-- A grace longer than a week would call an occurrence admitted a week late "on time"; the bound
-- also keeps claim time minus grace far from bigint overflow. 604 800 000 ms = 7 days.
ALTER TABLE ql3.trigger_schedules
    ADD CONSTRAINT trigger_schedules_grace_bound CHECK (misfire_grace_ms <= 604800000);

-- The claim contract's owner id is 1..200 characters (OWNER_ID_MAX_LENGTH); versions only grow.
ALTER TABLE ql3.trigger_schedules
    ADD CONSTRAINT trigger_schedules_owner_length CHECK (
        claim_owner_id IS NULL OR length(claim_owner_id) BETWEEN 1 AND 200
    ),
    ADD CONSTRAINT trigger_schedules_version_positive CHECK (version >= 0);

-- 2. Quarantine -------------------------------------------------------------------------------------

-- `invalid`: a row no replica could read or decide (its reason says why). It is never claimed (the
-- due index and the claim take only `active` rows) and holds no claim; an admin brings it back by
-- applying a corrected definition, or by `resume` once the stored one reads again.
ALTER TABLE ql3.trigger_schedules
    ADD COLUMN invalid_reason text,
    ADD COLUMN invalidated_at_ms bigint,
    DROP CONSTRAINT trigger_schedules_state,
    ADD CONSTRAINT trigger_schedules_state
        CHECK (state IN ('active', 'paused', 'exhausted', 'retired', 'invalid')),
    ADD CONSTRAINT trigger_schedules_invalid_reason CHECK (
        (state = 'invalid') = (invalid_reason IS NOT NULL)
        AND (invalid_reason IS NULL) = (invalidated_at_ms IS NULL)
        AND (invalid_reason IS NULL OR length(invalid_reason) BETWEEN 1 AND 2000)
    ),
    ADD CONSTRAINT trigger_schedules_invalid_unclaimed CHECK (
        state <> 'invalid' OR claim_token IS NULL
    );

-- `ql3_schedules_invalid` and `ql3 status` count these often; normally the index is empty.
CREATE INDEX trigger_schedules_invalid ON ql3.trigger_schedules (id) WHERE state = 'invalid';

-- The runtime quarantines (state, claim, version and time columns it already writes, plus these);
-- the admin clears them when it brings a row back.
GRANT UPDATE (invalid_reason, invalidated_at_ms) ON ql3.trigger_schedules TO ql3_runtime, ql3_admin;

-- 3. Zone rules -------------------------------------------------------------------------------------

-- The one version of zone rules (the `tzdata` release) every replica must decide with. A replica
-- whose rules differ claims nothing: the claim statement compares its version with this row in
-- the same statement, so switching it (`ql3 zone-rules adopt`) is atomic for every replica.
-- One row at most (the primary key is the constant true); `ql3 migrate` writes the first.
CREATE TABLE ql3.zone_rules (
    singleton      boolean NOT NULL DEFAULT true PRIMARY KEY,
    version        text    NOT NULL,
    recorded_at_ms bigint  NOT NULL,
    recorded_by    text    NOT NULL,
    CONSTRAINT zone_rules_singleton CHECK (singleton),
    CONSTRAINT zone_rules_version_shape CHECK (version ~ '^[0-9A-Za-z][0-9A-Za-z.+_-]{0,63}$'),
    CONSTRAINT zone_rules_recorded_by_length CHECK (length(recorded_by) BETWEEN 1 AND 128)
);

-- Replicas read it (every claim); the admin reads and switches it; only the owner deletes.
GRANT SELECT ON ql3.zone_rules TO ql3_runtime, ql3_admin;
GRANT INSERT (version, recorded_at_ms, recorded_by), UPDATE (version, recorded_at_ms, recorded_by)
    ON ql3.zone_rules TO ql3_admin;
