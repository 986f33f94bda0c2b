-- Reservations nobody completes expire (ReservationsToExpire): the
-- round looks them up by age without scanning every generation. (SQLite
-- has generations_live, 0005, on status.)
CREATE INDEX generations_reserved ON generations (created_at) WHERE status = 'reserved';
