/*-------------------------------------------------------------------------
 *
 * command.h
 *	  Commands: the lifecycle and its judgements, forming a command, the
 *	  registry, frames, and the answers (confirm, approve) that move them.
 *
 *-------------------------------------------------------------------------
 */
#ifndef CSCP_COMMAND_H
#define CSCP_COMMAND_H

#include "cscp.h"

/* command_fsm.c: the command lifecycle */
typedef enum CommandState
{
	CMD_RECEIVED,
	CMD_CANONICALIZED,
	CMD_CONFIRMATION_REQUIRED,
	CMD_CONFIRMED,
	CMD_AUTHZ_PENDING,
	CMD_AUTHORIZED,
	CMD_REJECTED,
	CMD_STARTED,
	CMD_EXECUTED,
	CMD_FAILED,
	CMD_CANCELED,
	CMD_COMPENSATED,
	CMD_NUM_STATES
} CommandState;

/* command_api.c: command_submit from C */
typedef struct CscpSubmitted
{
	Datum		command_id;
	CommandState state;
	bool		replayed;
	Jsonb	   *outcome;		/* or NULL */
} CscpSubmitted;

/*
 * What cscp.message_turn did for the command it submits before submitting
 * it: the key's lock taken, its id chosen, and, when context_used, its
 * context made to name it as its last already (cscp_context_open_row).
 */
typedef struct CscpSubmitPrepared
{
	Datum		command_id;		/* uuid, routed by the conversation */
	bool		context_used;
} CscpSubmitPrepared;

extern void cscp_submit_command(text *tenant_id, text *conversation_id, text *actor_id,
								text *idempotency_key, text *command_name, bool mutating,
								ArrayType *message_ids, Jsonb *payload,
								text *target_fingerprint, const CscpSubmitPrepared *prepared,
								CscpSubmitted *result);

extern const char *const cscp_command_state_names[CMD_NUM_STATES];
extern CommandState cscp_command_state_of(Oid typoid, Datum value);
extern Datum cscp_command_state_datum(Oid typoid, CommandState state);
extern const char *cscp_command_step_refusal(HeapTuple row, TupleDesc desc, bool ctx_read,
											 HeapTuple ctx, TupleDesc ctxdesc, CommandState to,
											 CommandState *from);
extern void cscp_command_supersede(Datum tenant, Datum context_id, bool approval,
								  Datum command_id);
extern void cscp_command_record_refusal(HeapTuple row, TupleDesc desc, CommandState from,
										CommandState to, const char *why, Jsonb *detail);

/* registry.c: whether a command mutates, and the governance of a tenant */
typedef enum CscpRegistryMode
{
	CSCP_REGISTRY_ARGUMENT,		/* command_submit's mutating argument */
	CSCP_REGISTRY_RECOVERY,		/* a retry, reprocess or compensate cscp forms */
	CSCP_REGISTRY_ROW,			/* a new row of cscp.command */
	CSCP_REGISTRY_RECOVERY_ROW	/* a new row of cscp.command naming a target */
} CscpRegistryMode;

extern bool cscp_registry_mutating(text *tenant, text *name, bool given, CscpRegistryMode mode);
extern bool cscp_registry_unapproved(Datum tenant, Datum command_id, text *name, bool recovery);
extern bool cscp_registry_recovery_gated(Datum tenant, Datum target_id);
extern bool cscp_registry_cancel_unapproved(Datum tenant, Datum command_id);

/* frame.c: the context state a command is formed from */
extern Jsonb *cscp_frame_state(HeapTuple ctx, TupleDesc desc, ArrayType *message_ids);
extern Datum cscp_frame_record(Datum tenant, text *conversation, int32 routing, Datum context_id,
							   Jsonb *state, char **hash);
/* How cscp_frame_context reads the context: no lock, FOR SHARE, FOR NO KEY UPDATE */
typedef enum CscpFrameLock
{
	CSCP_FRAME_READ,
	CSCP_FRAME_SHARE,
	CSCP_FRAME_UPDATE
} CscpFrameLock;

extern const char *cscp_frame_context(Datum tenant, Datum context_id, Datum conversation,
									  const Datum *actor, CscpFrameLock lock, HeapTuple *ctx,
									  TupleDesc *ctxdesc);

/* confirm.c: a confirmation or approval question that lapsed */
extern void cscp_lapse(HeapTuple ctx, TupleDesc ctxdesc, HeapTuple cmd, TupleDesc cmddesc,
					   const char *why);

/* answer.c: what every answer shares */
typedef struct CscpAnswer
{
	text	   *tenant_id;
	text	   *conversation_id;
	const char *kind;			/* confirm, approve */
	text	   *message_id;
	text	   *answered_by;
	const char *outcome;
	Datum		command_id;		/* uuid, when has_command */
	bool		has_command;
	Datum		context_id;		/* uuid, when has_context */
	bool		has_context;
} CscpAnswer;

extern char *cscp_slot_text(JsonbValue *slot, const char *key);
extern JsonbValue *cscp_answer_slot(HeapTuple ctx, TupleDesc ctxdesc, const char *slot);
extern void cscp_answer_lock(text *tenant, const char *kind, text *conversation, text *message_id);
extern void cscp_answer_check_args(FunctionCallInfo fcinfo, const char *answerer,
								   const char *decision);

extern void cscp_answer_put(ReturnSetInfo *rsinfo, const CscpAnswer *a);
extern bool cscp_answer_keep(const CscpAnswer *a, ReturnSetInfo *rsinfo);
extern void cscp_answer_move(const CscpAnswer *a, HeapTuple ctx, TupleDesc ctxdesc,
							 HeapTuple cmd, TupleDesc cmddesc, CommandState to_state,
							 const char *why, Jsonb *detail);
extern HeapTuple cscp_answer_last_command(HeapTuple ctx, TupleDesc ctxdesc, TupleDesc *cmddesc);
extern void cscp_answer_refusal(const CscpAnswer *a, const char *to_state, HeapTuple ctx,
								TupleDesc ctxdesc, Jsonb *detail);

#endif							/* CSCP_COMMAND_H */
