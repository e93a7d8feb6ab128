/*-------------------------------------------------------------------------
 *
 * conversation.h
 *	  Conversations and their turns (OpenWOP RFC 0005): what the API
 *	  (conversation_api.c, message_turn.c), the conversation's state machine
 *	  (conversation_fsm.c), the turn's shape (turns.c), the turn trigger
 *	  (turn_guard.c) and the event log (events.c) share.
 *
 * Calls go one way: the API calls the state machine, the turn functions
 * and the event log; the triggers call the state machine and the turn
 * functions; nothing calls the API.  A decision (may this turn be
 * recorded? may this row change?) is made by one function of
 * conversation_fsm.c, called alike by the API before it writes and by the
 * triggers on every row, whoever writes it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef CSCP_CONVERSATION_H
#define CSCP_CONVERSATION_H

#include "cscp.h"

#include "utils/numeric.h"

/* OpenWOP's conversation-turn.schema.json: messageId is 1 to 256 characters. */
#define CSCP_MAX_MESSAGE_ID_CHARS 256
/* ... and ts an integer from 0, at most the largest a JSON reader holds exactly (2^53 - 1). */
#define CSCP_MAX_TURN_TS INT64CONST(9007199254740991)
#define CSCP_MAX_TURN_CONTENT_BYTES (1024 * 1024)
#define CSCP_MAX_TURN_CONTENT_DEPTH 64

/* A conversation row, locked, as the C code reads it. */
typedef struct CscpConversation
{
	char	   *tenant_id;
	char	   *conversation_id;
	char	   *agent_id;
	bool		closed;
	Jsonb	   *schema;			/* NULL: no schema */
	int64		timeout_ms;		/* 0: no timeout */
	TimestampTz deadline;		/* valid when timeout_ms > 0 */
	char	   *causation_id;
	int32		next_turn_index;
	int32		next_event_seq;
	char	   *close_reason;	/* NULL while open */
} CscpConversation;

/* How a turn ends its conversation, if it does. */
typedef enum CscpCloseKind
{
	CSCP_CLOSE_NONE,
	CSCP_CLOSE_BY_TURN,			/* cscp.conversation_close */
	CSCP_CLOSE_BY_TIMEOUT		/* the deadline passed */
} CscpCloseKind;

/* The state machine's verdict on recording a turn (conversation_fsm.c). */
typedef enum CscpTurnVerdict
{
	CSCP_TURN_OK,
	CSCP_TURN_CLOSED,			/* the conversation is closed: 55000 */
	CSCP_TURN_TIMED_OUT,		/* past its deadline, not the timeout's turn: 55000 */
	CSCP_TURN_INDEX_TAKEN,		/* below next_turn_index: 23505 */
	CSCP_TURN_INDEX_GAP,		/* above next_turn_index: 22023 */
	CSCP_TURN_TOO_MANY			/* the counters would overflow: 54000 */
} CscpTurnVerdict;

/* A ConversationTurn as parsed from the API's argument (turns.c). */
typedef struct CscpTurn
{
	char	   *message_id;		/* NULL: assigned */
	bool		has_index;
	int32		turn_index;
	const char *role;
	char	   *sender;
	Jsonb	   *content;
	Datum		ts;				/* numeric */
	Jsonb	   *extra;			/* to, groupId, speakerId, agent; NULL: none */
} CscpTurn;

/* What a turn is recorded as: its place, its id and its content's hash. */
typedef struct CscpTurnFacts
{
	int32		turn_index;
	const char *message_id;
	const char *role;
	const char *sender;
	const char *content_hash;
} CscpTurnFacts;

/* An event of the conversation's log, as the row guard reads it (events.c). */
typedef struct CscpEvent
{
	char	   *type;
	int32		turn_index;		/* -1: none */
	char	   *message_id;		/* payload's "messageId" (conversation.closed); else NULL */
	char	   *content_hash;	/* payload's "contentHash" (conversation.closed); else NULL */
	char	   *reason;			/* payload's "reason" (conversation.closed); else NULL */
	Jsonb	   *outcome;		/* payload's "outcome" (conversation.closed); else NULL */
	TimestampTz created_at;
} CscpEvent;

/* What an API call answers: the event, turn index and message id, and its outcome. */
typedef struct CscpTurnResult
{
	char	   *event_id;
	int32		turn_index;
	char	   *message_id;
	const char *outcome;		/* exchanged | replayed | diverged | aborted | timed_out */
	Jsonb	   *turn;			/* the turn recorded, when replayed, diverged or aborted */
} CscpTurnResult;

/* conversation_fsm.c: the state machine, the row guard, the row lock */
extern CscpTurnVerdict cscp_conversation_turn_verdict(const CscpConversation *conv,
													  int32 turn_index,
													  CscpCloseKind close,
													  TimestampTz now);
extern void cscp_conversation_refuse_turn(CscpTurnVerdict verdict,
										  const CscpConversation *conv,
										  int32 turn_index);
extern void cscp_conversation_closed_error(const CscpConversation *conv, int sqlerrcode);
extern bool cscp_conversation_past_deadline(const CscpConversation *conv, TimestampTz now);
extern bool cscp_conversation_lock(const char *tenant_id, const char *conversation_id,
								   CscpConversation *conv);
extern void cscp_conversation_advance(const CscpConversation *conv,
									  int32 next_turn_index, int32 next_event_seq,
									  const char *close_reason, Jsonb *outcome,
									  const CscpTurnFacts *noted, TimestampTz now);
extern void cscp_conversation_missing(const char *tenant_id, const char *conversation_id);

/* turns.c: the ConversationTurn, its checks and its content */
extern const char *cscp_turn_role(const char *s, int len);
extern void cscp_turn_parse(Jsonb *turn, const char *argname, CscpTurn *out);
extern void cscp_turn_check_ts(Numeric ts, const char *what);
extern void cscp_turn_check_message_id(const char *id, int len, const char *what);
extern Jsonb *cscp_turn_optional_fields(Jsonb *turn, const char *argname, bool only_optional);
extern void cscp_turn_check_schema(const char *convid, Jsonb *schema, Jsonb *content);
extern char *cscp_turn_content_hash(Jsonb *content, int32 *size);
extern char *cscp_turn_message_id(const char *conversation_id, int32 turn_index,
								  const char *role);
extern void cscp_check_json_limits(Jsonb *j, const char *what);
extern void cscp_turn_validate_early(const char *tenant_id, const char *conversation_id,
									 Jsonb *content, TimestampTz now);
extern void cscp_turn_note_schema(const CscpConversation *conv);

/* turn_guard.c: recording a turn's event and what it does to the conversation */
extern char *cscp_turn_record(const CscpConversation *conv, const CscpTurnFacts *turn,
							  CscpCloseKind close, Jsonb *outcome, TimestampTz now);

/* conversation_api.c: a turn recorded as cscp.conversation_exchange records it */
extern void cscp_exchange_turn(text *tenant, text *conversation, Jsonb *turn,
							   CscpTurnResult *res);

/* events.c: the event log */
extern char *cscp_event_id(const char *conversation_id, int32 seq);
extern char *cscp_event_append(const char *tenant_id, const char *conversation_id,
							   int32 seq, const char *type, const char *causation_id,
							   int32 turn_index, const char *payload_json,
							   TimestampTz now);
extern bool cscp_event_read(const char *tenant_id, const char *conversation_id, int32 seq,
							CscpEvent *ev);

/* conversation_api.c: the sweep's timeout of one conversation, called by sweep.c */
extern bool cscp_conversation_time_out(text *tenant, text *conversation);

#endif							/* CSCP_CONVERSATION_H */
