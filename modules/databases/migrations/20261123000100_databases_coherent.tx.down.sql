DROP TRIGGER IF EXISTS database_instances_coherent_truncate ON database_instances;
DROP TRIGGER IF EXISTS database_instances_coherent_update ON database_instances;
DROP TRIGGER IF EXISTS database_instances_coherent ON database_instances;
