-- Conversation ids are unique per owner, not globally (issue 35): ids clients choose (an AG-UI
-- `threadId`, an AI SDK chat `id`) may be the same for two users, and neither learns of the
-- other's. A message belongs to its owner's conversation.
ALTER TABLE messages ADD COLUMN user_id TEXT;
UPDATE messages m SET user_id = c.user_id FROM conversations c WHERE c.id = m.conversation_id;
ALTER TABLE messages ALTER COLUMN user_id SET NOT NULL;
ALTER TABLE messages DROP CONSTRAINT messages_conversation_id_fkey;
ALTER TABLE messages DROP CONSTRAINT messages_pkey;
ALTER TABLE conversations DROP CONSTRAINT conversations_pkey;
ALTER TABLE conversations ADD PRIMARY KEY (user_id, id);
ALTER TABLE messages ADD PRIMARY KEY (user_id, conversation_id, seq);
ALTER TABLE messages ADD FOREIGN KEY (user_id, conversation_id)
    REFERENCES conversations (user_id, id) ON DELETE CASCADE;
