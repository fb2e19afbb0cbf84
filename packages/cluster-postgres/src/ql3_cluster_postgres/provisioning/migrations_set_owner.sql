-- Objects created by migrations belong to ql3_owner, whichever login user runs them.
SET ROLE ql3_owner
