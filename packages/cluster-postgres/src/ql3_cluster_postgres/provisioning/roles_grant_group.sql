-- Make a login a member of one QL3 group role (idempotent: granting twice changes nothing).
GRANT {group} TO {name}
