-- Nothing to undo: the instants moved back are not kept, and the earlier ones are no less valid.
SELECT 1;
