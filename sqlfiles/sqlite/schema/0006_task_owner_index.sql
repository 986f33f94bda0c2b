-- tasks/get looks a task up by id and owner at once (GetOwnedTask): with
-- both in one index a foreign id misses in the index exactly as an unknown
-- one does, so the lookup's cost does not tell that the id exists.
CREATE UNIQUE INDEX tasks_id_owner ON tasks (task_id, owner);
