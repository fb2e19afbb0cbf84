-- PostgreSQL refuses to drop a template database.
ALTER DATABASE {name} WITH IS_TEMPLATE false
