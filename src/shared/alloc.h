/*-------------------------------------------------------------------------
 * alloc.h
 *	  The allocator the caller lends to src/shared.
 *
 * src/shared knows neither PostgreSQL nor SQLite: the server passes one
 * built on palloc, a replica one built on sqlite3_malloc.  Its shape is
 * protobuf-c's, so decoded messages are allocated by the caller's allocator.
 *-------------------------------------------------------------------------
 */
#ifndef MS_ALLOC_H
#define MS_ALLOC_H

#include <stddef.h>
#include <protobuf-c/protobuf-c.h>

typedef ProtobufCAllocator ms_allocator;

#endif
