SELECT coherent_unwatch('ai_keys');
