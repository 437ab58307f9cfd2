-- A stored thread of messages is a conversation (an issue's and its pull request's, a chat-face
-- one, a CLI one); "chat" names only the chat face (/v1/chat/completions, its turns and its rate
-- limits). Renames only: every row, sequence value and reference stays as it was.
ALTER TABLE chats RENAME TO conversations;
ALTER SEQUENCE chats_id_seq RENAME TO conversations_id_seq;
ALTER TABLE conversations RENAME COLUMN client_chat_id TO client_conversation_id;
ALTER TABLE conversations RENAME CONSTRAINT chats_pkey TO conversations_pkey;
ALTER TABLE conversations RENAME CONSTRAINT chats_repository_id_fkey TO conversations_repository_id_fkey;
ALTER TABLE conversations RENAME CONSTRAINT chats_repository_id_number_key
  TO conversations_repository_id_number_key;
ALTER TABLE conversations RENAME CONSTRAINT chats_kind_check TO conversations_kind_check;
ALTER TABLE conversations RENAME CONSTRAINT chats_origin TO conversations_origin;
ALTER TABLE conversations RENAME CONSTRAINT chats_api_principal TO conversations_api_principal;
ALTER INDEX chats_pr RENAME TO conversations_pr;
ALTER INDEX chats_local_repo RENAME TO conversations_local_repo;
ALTER INDEX chats_client_person RENAME TO conversations_client_person;
ALTER INDEX chats_client_operator RENAME TO conversations_client_operator;
ALTER INDEX chats_api_owner_id RENAME TO conversations_api_owner_id;
ALTER INDEX chats_api_operator RENAME TO conversations_api_operator;

ALTER TABLE jobs RENAME COLUMN chat_id TO conversation_id;
ALTER TABLE jobs RENAME CONSTRAINT jobs_chat_id_fkey TO jobs_conversation_id_fkey;
ALTER INDEX jobs_chat RENAME TO jobs_conversation;

ALTER TABLE messages RENAME COLUMN chat_id TO conversation_id;
ALTER TABLE messages RENAME CONSTRAINT messages_chat_id_fkey TO messages_conversation_id_fkey;

ALTER TABLE refusal_notices RENAME COLUMN chat_id TO conversation_id;
ALTER TABLE refusal_notices RENAME CONSTRAINT refusal_notices_chat_id_fkey
  TO refusal_notices_conversation_id_fkey;

ALTER TABLE chat_compactions RENAME TO conversation_compactions;
ALTER TABLE conversation_compactions RENAME COLUMN chat_id TO conversation_id;
ALTER TABLE conversation_compactions RENAME CONSTRAINT chat_compactions_pkey
  TO conversation_compactions_pkey;
ALTER TABLE conversation_compactions RENAME CONSTRAINT chat_compactions_chat_id_fkey
  TO conversation_compactions_conversation_id_fkey;

ALTER TABLE chat_images RENAME TO conversation_images;
ALTER TABLE conversation_images RENAME COLUMN chat_id TO conversation_id;
ALTER TABLE conversation_images RENAME CONSTRAINT chat_images_pkey TO conversation_images_pkey;
ALTER TABLE conversation_images RENAME CONSTRAINT chat_images_chat_id_fkey
  TO conversation_images_conversation_id_fkey;

-- The chat face's own tables keep their names (chat_turns, chat_rate_limits); a turn names the
-- conversation it belongs to.
ALTER TABLE chat_turns RENAME COLUMN chat_id TO conversation_id;
ALTER TABLE chat_turns RENAME CONSTRAINT chat_turns_chat_id_fkey TO chat_turns_conversation_id_fkey;
