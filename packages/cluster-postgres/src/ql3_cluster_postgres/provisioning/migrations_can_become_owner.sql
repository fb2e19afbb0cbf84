-- May the connected user SET ROLE ql3_owner? (false when the role does not exist)
SELECT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'ql3_owner')
   AND pg_has_role(current_user, 'ql3_owner', 'MEMBER') AS can_become_owner
