-- An admin change that places cursors: hold the recorded zone rules version (FOR SHARE) for the
-- rest of the transaction, so an adopt (FOR UPDATE) waits for it or it waits for the adopt and
-- then reads the new version; every cursor is placed with the version read here.
SELECT z.version
FROM ql3.zone_rules AS z
FOR SHARE
