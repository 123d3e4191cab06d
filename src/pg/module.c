/*-------------------------------------------------------------------------
 * module.c
 *	  The server extension's entry: its magic, and at load its settings, its
 *	  parse analysis hook (owner.h) and, preloaded, what runs in shared memory
 *	  and the background: the relay's wake-up, the refused-claim alarm's
 *	  workers, the relay's launcher.  Over every floor of src/pg: nothing
 *	  includes it (scripts/check-layers knows it).
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "fmgr.h"
#include "miscadmin.h"

#include "claim.h"
#include "owner.h"
#include "sent.h"
#include "settings.h"
#include "wake.h"
#include "worker.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

void
_PG_init(void)
{
	ms_settings_init();
	ms_owner_init();
	if (process_shared_preload_libraries_in_progress)
	{
		ms_wake_preload();
		ms_alarm_preload();
		ms_sent_preload();
		ms_worker_register_static();
	}
}
