-- Webhooks (SPEC §13): the outbox keeps no secret. `signer` names which configured secret
-- signs a message when it is sent (`server`: webhookDelivery.secret; `receiver`: the
-- `webhooks[]` entry of its URL; `none`: unsigned). Rows from before keep their `secret`.
ALTER TABLE webhook_deliveries ADD COLUMN signer TEXT;
