/* Read-ahead for the database files ckpt reads: a VFS layered over SQLite's default one, opened by the compiled
   reader and by --deep's second read (store/sqlite.py, connect_readonly with read_ahead).

   SQLite reads a database file one page per system call, and copies each page into its cache. The scan
   reads the file mostly in order (78% of the reads of the 45,000-checkpoint store start where the previous
   one ended), so on 1.4 GB the calls alone, 341,000 of them, cost about an eighth of the scan's CPU. Here a
   read that starts where a recent read ended fetches the next READ_AHEAD bytes in one call, into a window
   of this file's own memory, and the pages that follow are handed to SQLite from there: through xFetch,
   SQLite's interface for memory-mapped pages, so no page is copied twice. Several windows are kept, because
   the reader walks two tables (and their indexes) side by side. A read that continues nothing goes to the
   file as it would have.

   This is not a memory map: a window is this process's copy of the bytes, read by the default VFS's own
   xRead, so a writer changing the file cannot change a page SQLite has checked, and an I/O error is an
   error, not a SIGBUS. xFetch serves pages only after the connection asked for it (SQLITE_FCNTL_MMAP_SIZE,
   from PRAGMA mmap_size), which this file answers itself: the default VFS never maps the file.

   Only the main database file is layered; the WAL, its index and every other file are the default VFS's
   own. A window is served only under the locks it was read under: every xLock, xUnlock and xShmLock drops
   all windows (a window SQLite still holds pages of stays allocated until xUnfetch gives them back), so none
   outlives the read transaction whose snapshot SQLite's own page cache relies on too. (Under immutable=1
   SQLite takes no locks, and windows last as long as the connection, as its page cache does.) A window that
   cannot be read whole is not kept, and the request then goes to the file exactly as asked, so short reads
   and errors are the default VFS's own. (docs/architecture.md, "Reading a database") */

#include <sqlite3.h>
#include <stdint.h>
#include <string.h>

#include "_inert.h"

#define WINDOWS 8
#define READ_AHEAD (128 * 1024)
/* Zeroed bytes after a window's end: a page handed out last in a window is followed by these, as a mapped
   page at the end of a file is followed by the zeroed rest of its memory page. */
#define PAD 256
/* The file layered below this one, at an 8-byte aligned offset after it. */
#define ROUND8(n) (((n) + 7) & ~(size_t)7)

typedef struct {
    sqlite3_int64 start, end; /* the file's bytes [start, end) this entry covered last; end -1: none */
    unsigned char *bytes;     /* READ_AHEAD bytes once allocated */
    int holds;                /* `bytes` hold [start, end) now (else the entry only remembers where a read ended) */
    int pins;                 /* pages of `bytes` SQLite holds through xFetch: never refilled while any */
    unsigned long used;       /* when this entry last served or was filled: the least recent is replaced */
} Window;

typedef struct {
    sqlite3_file base;
    sqlite3_file *below;
    Window windows[WINDOWS];
    unsigned long clock;
    sqlite3_int64 fetch_limit; /* the connection's mmap_size: xFetch serves pages only when it is above 0 */
    sqlite3_int64 size;        /* the file's size under the current locks; -1 until asked (one fstat per lock) */
} AheadFile;

static sqlite3_vfs *default_vfs;
/* For tests: proof that windows were read, served reads, and handed pages over in place. */
static unsigned long long refills_made, reads_served, pages_lent;

static void drop_windows(AheadFile *file) {
    file->size = -1;
    for (int i = 0; i < WINDOWS; i++) {
        file->windows[i].holds = 0;
        file->windows[i].end = -1;
    }
}

/* The least recently used window SQLite holds no page of, or NULL when it holds pages of all. */
static Window *least_recent(AheadFile *file) {
    Window *oldest = NULL;
    for (int i = 0; i < WINDOWS; i++)
        if (file->windows[i].pins == 0 && (oldest == NULL || file->windows[i].used < oldest->used))
            oldest = &file->windows[i];
    return oldest;
}

/* The window holding [offset, offset + amount), read now if a recent read ended at `offset`; else NULL. */
static Window *window_for(AheadFile *file, sqlite3_int64 offset, int amount) {
    Window *continued = NULL;
    for (int i = 0; i < WINDOWS; i++) {
        Window *window = &file->windows[i];
        if (window->holds && offset >= window->start && offset + amount <= window->end) {
            window->used = ++file->clock;
            reads_served++;
            return window;
        }
        if (window->end == offset && continued == NULL) continued = window;
    }
    sqlite3_file *below = file->below;
    if (continued == NULL || amount <= 0 || amount > READ_AHEAD / 2) return NULL;
    /* Under a read lock the pages a transaction reads from the file stay put (a checkpoint copies back only
       frames below every reader's mark): a size that grew since only ends a window early. */
    if (file->size < 0 && below->pMethods->xFileSize(below, &file->size) != SQLITE_OK) file->size = -1;
    sqlite3_int64 size = file->size;
    if (size - offset < amount) return NULL;
    /* The stream goes on in its own entry unless SQLite holds pages of it. */
    Window *target = continued->pins == 0 ? continued : least_recent(file);
    if (target == NULL) return NULL;
    int length = size - offset < READ_AHEAD ? (int)(size - offset) : READ_AHEAD;
    if (target->bytes == NULL) target->bytes = sqlite3_malloc(READ_AHEAD + PAD);
    target->holds = 0;
    target->end = -1;
    if (target->bytes == NULL || below->pMethods->xRead(below, target->bytes, length, offset) != SQLITE_OK)
        return NULL;
    memset(target->bytes + length, 0, PAD);
    target->start = offset;
    target->end = offset + length;
    target->holds = 1;
    target->used = ++file->clock;
    refills_made++;
    reads_served++;
    return target;
}

static int ahead_read(sqlite3_file *handle, void *buffer, int amount, sqlite3_int64 offset) {
    AheadFile *file = (AheadFile *)handle;
    Window *window = window_for(file, offset, amount);
    if (window != NULL) {
        memcpy(buffer, window->bytes + (offset - window->start), (size_t)amount);
        return SQLITE_OK;
    }
    /* Not a continuation (or no window could be read): the file as asked, and remember where this read ended. */
    int code = file->below->pMethods->xRead(file->below, buffer, amount, offset);
    Window *remembered = least_recent(file);
    if (remembered != NULL && code == SQLITE_OK) {
        remembered->holds = 0;
        remembered->start = offset;
        remembered->end = offset + amount;
        remembered->used = ++file->clock;
    }
    return code;
}

static int ahead_close(sqlite3_file *handle) {
    AheadFile *file = (AheadFile *)handle;
    for (int i = 0; i < WINDOWS; i++) sqlite3_free(file->windows[i].bytes);
    return file->below->pMethods->xClose(file->below);
}

static int ahead_write(sqlite3_file *handle, const void *buffer, int amount, sqlite3_int64 offset) {
    AheadFile *file = (AheadFile *)handle;
    drop_windows(file);
    return file->below->pMethods->xWrite(file->below, buffer, amount, offset);
}

static int ahead_truncate(sqlite3_file *handle, sqlite3_int64 size) {
    AheadFile *file = (AheadFile *)handle;
    drop_windows(file);
    return file->below->pMethods->xTruncate(file->below, size);
}

static int ahead_sync(sqlite3_file *handle, int flags) {
    AheadFile *file = (AheadFile *)handle;
    return file->below->pMethods->xSync(file->below, flags);
}

static int ahead_file_size(sqlite3_file *handle, sqlite3_int64 *size) {
    AheadFile *file = (AheadFile *)handle;
    return file->below->pMethods->xFileSize(file->below, size);
}

static int ahead_lock(sqlite3_file *handle, int level) {
    AheadFile *file = (AheadFile *)handle;
    drop_windows(file);
    return file->below->pMethods->xLock(file->below, level);
}

static int ahead_unlock(sqlite3_file *handle, int level) {
    AheadFile *file = (AheadFile *)handle;
    drop_windows(file);
    return file->below->pMethods->xUnlock(file->below, level);
}

static int ahead_check_reserved(sqlite3_file *handle, int *reserved) {
    AheadFile *file = (AheadFile *)handle;
    return file->below->pMethods->xCheckReservedLock(file->below, reserved);
}

static int ahead_file_control(sqlite3_file *handle, int op, void *argument) {
    AheadFile *file = (AheadFile *)handle;
    if (op == SQLITE_FCNTL_MMAP_SIZE) {
        /* Answered here, never passed below: the default VFS would map the file. In: the new limit, or a
           negative value to only ask; out: the limit before. */
        sqlite3_int64 *limit = argument, before = file->fetch_limit;
        if (*limit >= 0) file->fetch_limit = *limit;
        *limit = before;
        return SQLITE_OK;
    }
    return file->below->pMethods->xFileControl(file->below, op, argument);
}

static int ahead_sector_size(sqlite3_file *handle) {
    AheadFile *file = (AheadFile *)handle;
    return file->below->pMethods->xSectorSize(file->below);
}

static int ahead_device(sqlite3_file *handle) {
    AheadFile *file = (AheadFile *)handle;
    return file->below->pMethods->xDeviceCharacteristics(file->below);
}

static int ahead_shm_map(sqlite3_file *handle, int region, int size, int extend, void volatile **mapped) {
    AheadFile *file = (AheadFile *)handle;
    return file->below->pMethods->xShmMap(file->below, region, size, extend, mapped);
}

static int ahead_shm_lock(sqlite3_file *handle, int offset, int count, int flags) {
    AheadFile *file = (AheadFile *)handle;
    drop_windows(file);
    return file->below->pMethods->xShmLock(file->below, offset, count, flags);
}

static void ahead_shm_barrier(sqlite3_file *handle) {
    AheadFile *file = (AheadFile *)handle;
    file->below->pMethods->xShmBarrier(file->below);
}

static int ahead_shm_unmap(sqlite3_file *handle, int delete_flag) {
    AheadFile *file = (AheadFile *)handle;
    drop_windows(file);
    return file->below->pMethods->xShmUnmap(file->below, delete_flag);
}

/* A page from a window, in place; NULL sends SQLite to xRead. Pages are handed out 8-byte aligned only. */
static int ahead_fetch(sqlite3_file *handle, sqlite3_int64 offset, int amount, void **page) {
    AheadFile *file = (AheadFile *)handle;
    *page = NULL;
    if (file->fetch_limit <= 0) return SQLITE_OK;
    Window *window = window_for(file, offset, amount);
    if (window == NULL) return SQLITE_OK;
    unsigned char *bytes = window->bytes + (offset - window->start);
    if (((uintptr_t)bytes & 7) != 0) return SQLITE_OK;
    window->pins++;
    pages_lent++;
    *page = bytes;
    return SQLITE_OK;
}

static int ahead_unfetch(sqlite3_file *handle, sqlite3_int64 offset, void *page) {
    AheadFile *file = (AheadFile *)handle;
    (void)offset;
    const unsigned char *given = page;
    /* No page: SQLite lets go of every mapping (the file changed between transactions, or an error). */
    if (page == NULL) drop_windows(file);
    for (int i = 0; page != NULL && i < WINDOWS; i++) {
        Window *window = &file->windows[i];
        if (window->pins > 0 && given >= window->bytes && given < window->bytes + READ_AHEAD) {
            window->pins--;
            break;
        }
    }
    return SQLITE_OK;
}

static const sqlite3_io_methods ahead_methods = {
    3,
    ahead_close,
    ahead_read,
    ahead_write,
    ahead_truncate,
    ahead_sync,
    ahead_file_size,
    ahead_lock,
    ahead_unlock,
    ahead_check_reserved,
    ahead_file_control,
    ahead_sector_size,
    ahead_device,
    ahead_shm_map,
    ahead_shm_lock,
    ahead_shm_barrier,
    ahead_shm_unmap,
    ahead_fetch,
    ahead_unfetch,
};

static int ahead_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *handle, int flags, int *out_flags) {
    (void)vfs;
    if (!(flags & SQLITE_OPEN_MAIN_DB)) return default_vfs->xOpen(default_vfs, name, handle, flags, out_flags);
    AheadFile *file = (AheadFile *)handle;
    memset(file, 0, sizeof *file);
    file->below = (sqlite3_file *)((char *)file + ROUND8(sizeof(AheadFile)));
    drop_windows(file);
    int code = default_vfs->xOpen(default_vfs, name, file->below, flags, out_flags);
    const sqlite3_io_methods *methods = file->below->pMethods;
    if (code != SQLITE_OK) {
        /* SQLite expects no methods after a failed open (3.40's sqlite3OsOpen asserts it): close below here. */
        if (methods != NULL) methods->xClose(file->below);
        file->base.pMethods = NULL;
        return code;
    }
    if (methods->iVersion < 3) {
        /* Every layered method must exist below: such a file is opened unlayered instead (and cannot be
           mapped either: SQLite sends mmap settings only to version 3 files). */
        methods->xClose(file->below);
        return default_vfs->xOpen(default_vfs, name, handle, flags, out_flags);
    }
    file->base.pMethods = &ahead_methods;
    return SQLITE_OK;
}

static int ahead_delete(sqlite3_vfs *vfs, const char *name, int sync_dir) {
    (void)vfs;
    return default_vfs->xDelete(default_vfs, name, sync_dir);
}

static int ahead_access(sqlite3_vfs *vfs, const char *name, int flags, int *result) {
    (void)vfs;
    return default_vfs->xAccess(default_vfs, name, flags, result);
}

static int ahead_full_pathname(sqlite3_vfs *vfs, const char *name, int size, char *out) {
    (void)vfs;
    return default_vfs->xFullPathname(default_vfs, name, size, out);
}

static void *ahead_dl_open(sqlite3_vfs *vfs, const char *name) {
    (void)vfs;
    return default_vfs->xDlOpen(default_vfs, name);
}

static void ahead_dl_error(sqlite3_vfs *vfs, int size, char *message) {
    (void)vfs;
    default_vfs->xDlError(default_vfs, size, message);
}

static void (*ahead_dl_sym(sqlite3_vfs *vfs, void *library, const char *symbol))(void) {
    (void)vfs;
    return default_vfs->xDlSym(default_vfs, library, symbol);
}

static void ahead_dl_close(sqlite3_vfs *vfs, void *library) {
    (void)vfs;
    default_vfs->xDlClose(default_vfs, library);
}

static int ahead_randomness(sqlite3_vfs *vfs, int size, char *out) {
    (void)vfs;
    return default_vfs->xRandomness(default_vfs, size, out);
}

static int ahead_sleep(sqlite3_vfs *vfs, int microseconds) {
    (void)vfs;
    return default_vfs->xSleep(default_vfs, microseconds);
}

static int ahead_current_time(sqlite3_vfs *vfs, double *now) {
    (void)vfs;
    return default_vfs->xCurrentTime(default_vfs, now);
}

static int ahead_last_error(sqlite3_vfs *vfs, int size, char *message) {
    (void)vfs;
    return default_vfs->xGetLastError(default_vfs, size, message);
}

static int ahead_current_time_int64(sqlite3_vfs *vfs, sqlite3_int64 *now) {
    (void)vfs;
    return default_vfs->xCurrentTimeInt64(default_vfs, now);
}

static sqlite3_vfs ahead_vfs = {
    .iVersion = 2,
    .mxPathname = 0, /* set from the default VFS */
    .zName = "deerflow-ckpt-readahead",
    .xOpen = ahead_open,
    .xDelete = ahead_delete,
    .xAccess = ahead_access,
    .xFullPathname = ahead_full_pathname,
    .xDlOpen = ahead_dl_open,
    .xDlError = ahead_dl_error,
    .xDlSym = ahead_dl_sym,
    .xDlClose = ahead_dl_close,
    .xRandomness = ahead_randomness,
    .xSleep = ahead_sleep,
    .xCurrentTime = ahead_current_time,
    .xGetLastError = ahead_last_error,
    .xCurrentTimeInt64 = ahead_current_time_int64,
};

const char *inert_readahead_vfs(void) {
    if (default_vfs != NULL) return ahead_vfs.zName;
    sqlite3_vfs *found = sqlite3_vfs_find(NULL);
    /* Version 2 is what every method above calls; an older default VFS is used as it is. */
    if (found == NULL || found->iVersion < 2) return NULL;
    default_vfs = found;
    ahead_vfs.mxPathname = found->mxPathname;
    ahead_vfs.szOsFile = (int)(ROUND8(sizeof(AheadFile)) + (size_t)found->szOsFile);
    if (sqlite3_vfs_register(&ahead_vfs, 0) != SQLITE_OK) {
        default_vfs = NULL;
        return NULL;
    }
    return ahead_vfs.zName;
}

void inert_readahead_counts(unsigned long long *refills, unsigned long long *served, unsigned long long *lent) {
    *refills = refills_made;
    *served = reads_served;
    *lent = pages_lent;
}
