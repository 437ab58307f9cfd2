-- The turn that brought a chat image, so that the image goes with a turn cancelled before it started,
-- and the age of images, so that old ones are deleted (issue 30).
ALTER TABLE conversation_images ADD COLUMN job_id bigint;
CREATE INDEX conversation_images_created ON conversation_images (created_at);

-- The operator's key (VMPILOT_API_KEY) once it was right, by its SHA-256: an address held back for
-- wrong keys still lets in keys verified before, and the operator's has no api_keys row.
CREATE TABLE verified_operator_keys (
  digest text PRIMARY KEY,
  verified_at timestamptz NOT NULL DEFAULT now()
);
