// Validate cscp's exported conversations (JSON lines on stdin, one cscp.conversation_export each)
// against OpenWOP's published conversation-turn and conversation-event schemas, with ajv (JSON
// Schema 2020-12), an implementation independent of cscp's own validator.  Every turn must be a
// ConversationTurn; the payload of every conversation.opened / .exchanged / .closed event must
// match conversation-event.schema.json.  Also checks that the validator bites: a turn with its
// messageId removed, and an exchanged payload with an extra field, must fail.
'use strict';
const fs = require('fs');
const path = require('path');
const Ajv2020 = require('ajv/dist/2020');

const dir = path.join(__dirname, 'schemas');
const ajv = new Ajv2020({ allErrors: true, strict: false });
const turnOk = ajv.compile(JSON.parse(fs.readFileSync(path.join(dir, 'conversation-turn.schema.json'), 'utf8')));
const eventOk = ajv.compile(JSON.parse(fs.readFileSync(path.join(dir, 'conversation-event.schema.json'), 'utf8')));
const kinds = new Set(['conversation.opened', 'conversation.exchanged', 'conversation.closed']);

let turns = 0, events = 0, failures = 0;
const fail = (what, errors) => {
  failures++;
  console.error(`not valid: ${what}: ${JSON.stringify(errors)}`);
};
const lines = fs.readFileSync(0, 'utf8').split('\n').filter((l) => l.trim() !== '');
for (const line of lines) {
  const conv = JSON.parse(line);
  for (const t of conv.turns) {
    turns++;
    if (!turnOk(t)) fail(`turn ${conv.conversationId}#${t.turnIndex}`, turnOk.errors);
  }
  for (const e of conv.events) {
    if (!kinds.has(e.type)) continue;
    events++;
    if (!eventOk(e.payload)) fail(`event ${e.eventId} (${e.type})`, eventOk.errors);
  }
}
// The validator must refuse what is not conforming.
const sample = lines.length ? JSON.parse(lines[0]) : null;
if (sample && sample.turns.length) {
  const broken = { ...sample.turns[0] };
  delete broken.messageId;
  if (turnOk(broken)) fail('a turn without messageId passed', []);
  const ex = sample.events.find((e) => e.type === 'conversation.exchanged');
  if (ex && eventOk({ ...ex.payload, extra: 1 })) fail('an exchanged payload with an extra field passed', []);
}
if (lines.length === 0 || turns === 0 || events === 0) fail('nothing to validate', []);
console.log(`${lines.length} conversations, ${turns} turns, ${events} events checked against OpenWOP's schemas; ${failures} failures`);
process.exit(failures ? 1 : 0);
