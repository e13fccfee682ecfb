-- A proposal made as a tool conversation (`--agent-tools`): its turns and
-- tool calls as JSON (kevo_proposer::tools::Transcript), beside the call
-- record whose tokens and cost are the whole conversation's. NULL for a
-- one-shot call. Keep in step with ../postgres/0011_tool_transcripts.sql.
ALTER TABLE llm_calls ADD COLUMN transcript TEXT;
