SELECT coherent_unwatch('database_instances');
