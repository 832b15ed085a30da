DROP TABLE IF EXISTS queue_space_sweeps;
DROP TABLE IF EXISTS queue_spaces;
