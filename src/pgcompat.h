/*-------------------------------------------------------------------------
 *
 * pgcompat.h
 *	  The server API differences between the PostgreSQL versions cscp
 *	  builds against (15, 17 and 18), in one place.
 *
 * Each name below is the newest server's spelling where one exists, or a
 * cscp_ name for an expression whose spelling changed; the #if picks the
 * older form on older servers.  Nothing else in src/ tests
 * PG_VERSION_NUM, so a new server version's changes land here.
 *
 *-------------------------------------------------------------------------
 */
#ifndef CSCP_PGCOMPAT_H
#define CSCP_PGCOMPAT_H

#include "postgres.h"

#include "miscadmin.h"
#include "storage/proc.h"

/* 17 renamed BackendId to ProcNumber and moved PGPROC.lxid into vxid. */
#if PG_VERSION_NUM >= 170000
#include "storage/procnumber.h"
/* This backend's slot among the server's processes. */
#define cscp_my_proc_slot() ((int) MyProcNumber)
/* The local id of this backend's current top-level transaction. */
#define cscp_my_lxid() (MyProc->vxid.lxid)
#else
#include "storage/backendid.h"
#define cscp_my_proc_slot() ((int) MyBackendId)
#define cscp_my_lxid() (MyProc->lxid)
#endif

/* 18 replaced pg_attribute_noreturn() (after the declarator) by pg_noreturn. */
#ifndef pg_noreturn
#define pg_noreturn pg_attribute_noreturn()
#endif

/*
 * 16 added an out-argument for error details to DecodeDateTime(); cscp
 * only needs the verdict.
 */
#if PG_VERSION_NUM >= 160000
#define cscp_decode_date_time(field, ftype, nf, dtype, tm, fsec, tz) \
	DecodeDateTime((field), (ftype), (nf), (dtype), (tm), (fsec), (tz), \
				   &(DateTimeErrorExtra) {0})
#else
#define cscp_decode_date_time(field, ftype, nf, dtype, tm, fsec, tz) \
	DecodeDateTime((field), (ftype), (nf), (dtype), (tm), (fsec), (tz))
#endif

#endif							/* CSCP_PGCOMPAT_H */
