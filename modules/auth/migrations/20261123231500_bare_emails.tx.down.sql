-- Nothing to undo: the emails rewritten are bare addresses the service accepts, and what each was
-- before is in its user.email_normalized audit event.
SELECT 1;
