GRANT {group} TO {name}
