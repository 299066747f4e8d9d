/*
 * fakenvml.c -- a fake libnvidia-ml.so.1 for berth's tests.
 *
 * A test double of the NVML C ABI: it exports exactly the NVML functions that nvidia-ml-py
 * (pynvml) calls for berth, with the struct layouts that pynvml expects, and answers them from
 * a JSON file named by $FAKE_NVML_STATE, re-read on every call so a test can rewrite it
 * between calls. Not a product: small, clear, single file.
 *
 * State file (every reading optional; an absent or null reading answers NOT_SUPPORTED):
 *
 *   {"driver": "550.54.15", "cuda": 12040,
 *    "errors": {"nvmlInitWithFlags": "NO_PERMISSION"},          system-level injection
 *    "gpus": [{"uuid": "GPU-...", "name": "NVIDIA A100-SXM4-80GB",
 *              "pci_bus_id": "00000000:07:00.0", "pci_device_id": 548540638, "minor": 0,
 *              "memory_total": 85899345920, "memory_used": 0,
 *              "util": 0, "mem_util": 0, "power_mw": 60000, "power_limit_mw": 400000,
 *              "temp": 35, "pstate": 0, "fan": 30, "clocks_event_reasons": 1,
 *              "sm_clock": 1410, "mem_clock": 1593, "energy_mj": 123456789, "memory_temp": 40,
 *              "pcie_tx_bytes": 1024000, "pcie_rx_bytes": 2048000, "pcie_replay": 0,
 *              "enc_util": 0, "dec_util": 0, "nvlink_tx_kib": 0, "nvlink_rx_kib": 0,
 *              "xid": [79],
 *              "mig": ["MIG-<uuid>", ...],
 *              "processes": [{"pid": 42, "used_memory": 1024, "type": "compute"}],
 *              "errors": {"nvmlDeviceGetPowerUsage": "NOT_SUPPORTED", "*": "GPU_IS_LOST"}}]}
 *
 * The GPUs' order in "gpus" is the NVML index order; "minor" (the N of /dev/nvidiaN) defaults
 * to the GPU's index. Errors are keyed by C function name, with
 * or without its _vN suffix; "*" applies to every function of that GPU (or, at top level, to
 * every system function). Values are NVML error names without the NVML_ERROR_ prefix, or
 * numbers. "processes" in the state are listed as written and do not change memory_used.
 * "mig" names MIG devices: nvmlDeviceGetHandleByUUID finds them and
 * nvmlDeviceGetDeviceHandleFromMigDeviceHandle gives their parent, nvmlDeviceGetMigMode says
 * MIG is enabled on that GPU (nothing else is modelled).
 * "memory_temp", "pcie_{tx,rx}_bytes" and "nvlink_{tx,rx}_kib" answer nvmlDeviceGetFieldValues
 * (NVML_FI_DEV_MEMORY_TEMP, _PCIE_COUNT_TX/RX_BYTES, _NVLINK_THROUGHPUT_DATA_TX/RX; scope ignored),
 * and so do "power_mw" (NVML_FI_DEV_POWER_AVERAGE) and "power_limit_mw" (_POWER_CURRENT_LIMIT),
 * with the errors injected for nvmlDeviceGetPowerUsage and _GetEnforcedPowerLimit;
 * other fields answer NOT_SUPPORTED.
 * "xid" lists the XID errors the GPU raised, oldest first: an event set registered for
 * nvmlEventTypeXidCriticalError gets, one nvmlEventSetWait_v2 at a time, those appended after
 * it registered (a GPU without the key does not support XID events); waits never block.
 *
 * Live processes: the directory $FAKE_NVML_PROCS (default "<state>.procs") holds one file per
 * pid, written by tests/fakenvml/workload.py, one line per GPU used:
 *
 *   <gpu uuid> <used memory bytes> <util %> <memory util %> <compute|graphics>
 *
 * A file counts only while its pid lives (kill(pid, 0) succeeds and it is not a zombie); its
 * memory is added to the GPU's memory_used and its utilisations to the GPU's (capped at 100).
 *
 * No state file (or $FAKE_NVML_STATE unset): nvmlInit fails with NVML_ERROR_DRIVER_NOT_LOADED.
 *
 * $FAKE_NVML_LOG, if set, names a file to which "init <pid>" and "shutdown <pid>" lines are
 * appended, so tests can check that a process initialises NVML once and shuts it down.
 *
 * $FAKE_NVML_CALLS, if set, names a file to which "<C function> <pid>" is appended at every
 * call of an NVML function (init and shutdown included), so tests and bench/startup.py can
 * count the calls a command makes per GPU.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int nvmlReturn_t;
enum {
	OK = 0, E_UNINITIALIZED = 1, E_INVALID_ARGUMENT = 2, E_NOT_SUPPORTED = 3,
	E_NO_PERMISSION = 4, E_NOT_FOUND = 6, E_INSUFFICIENT_SIZE = 7, E_DRIVER_NOT_LOADED = 9,
	E_GPU_IS_LOST = 15, E_ARGUMENT_VERSION_MISMATCH = 25, E_UNKNOWN = 999,
};

static const struct { const char *name; int code; const char *text; } ERRORS[] = {
	{"SUCCESS", 0, "Success"},
	{"UNINITIALIZED", 1, "Uninitialized"},
	{"INVALID_ARGUMENT", 2, "Invalid Argument"},
	{"NOT_SUPPORTED", 3, "Not Supported"},
	{"NO_PERMISSION", 4, "Insufficient Permissions"},
	{"ALREADY_INITIALIZED", 5, "Already Initialized"},
	{"NOT_FOUND", 6, "Not Found"},
	{"INSUFFICIENT_SIZE", 7, "Insufficient Size"},
	{"INSUFFICIENT_POWER", 8, "Insufficient External Power"},
	{"DRIVER_NOT_LOADED", 9, "Driver Not Loaded"},
	{"TIMEOUT", 10, "Timeout"},
	{"IRQ_ISSUE", 11, "Interrupt Request Issue"},
	{"LIBRARY_NOT_FOUND", 12, "NVML Shared Library Not Found"},
	{"FUNCTION_NOT_FOUND", 13, "Function Not Found"},
	{"CORRUPTED_INFOROM", 14, "Corrupted infoROM"},
	{"GPU_IS_LOST", 15, "GPU is lost"},
	{"RESET_REQUIRED", 16, "GPU requires restart"},
	{"OPERATING_SYSTEM", 17, "The operating system has blocked the request."},
	{"LIB_RM_VERSION_MISMATCH", 18, "RM has detected an NVML/RM version mismatch."},
	{"IN_USE", 19, "In use by another client"},
	{"MEMORY", 20, "Insufficient Memory"},
	{"NO_DATA", 21, "No data"},
	{"ARGUMENT_VERSION_MISMATCH", 25, "Argument version mismatch"},
	{"UNKNOWN", 999, "Unknown Error"},
};

/* ---------------------------------------------------------------- JSON (just enough) -- */

enum { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ };
typedef struct J {
	int type;
	double num;
	char *str;       /* J_STR value */
	char *key;       /* member name when inside an object */
	struct J *child; /* first element / member */
	struct J *next;  /* next sibling */
} J;

typedef struct { char *p; J *pool; size_t used, cap; } Parser;

static void skip_ws(Parser *ps) { while (isspace((unsigned char)*ps->p)) ps->p++; }

/* Decodes the string at ps->p (which points at '"') in place; returns it or NULL. */
static char *parse_string(Parser *ps)
{
	char *out = ++ps->p, *start = out;
	while (*ps->p && *ps->p != '"') {
		char c = *ps->p++;
		if (c == '\\') {
			c = *ps->p++;
			switch (c) {
			case 'n': c = '\n'; break;
			case 't': c = '\t'; break;
			case 'r': c = '\r'; break;
			case 'b': c = '\b'; break;
			case 'f': c = '\f'; break;
			case 'u': { /* non-ASCII becomes '?': the schema is ASCII */
				unsigned v = 0;
				for (int i = 0; i < 4; i++) {
					if (!isxdigit((unsigned char)*ps->p)) return NULL;
					char h = *ps->p++;
					v = v * 16 + (unsigned)(isdigit((unsigned char)h) ? h - '0' : (tolower(h) - 'a' + 10));
				}
				c = v < 128 ? (char)v : '?';
				break;
			}
			case '\0': return NULL;
			default: break; /* \" \\ \/ */
			}
		}
		*out++ = c;
	}
	if (*ps->p != '"') return NULL;
	ps->p++;
	*out = '\0'; /* out never passes the closing quote, already consumed */
	return start;
}

static J *parse_value(Parser *ps)
{
	skip_ws(ps);
	if (ps->used >= ps->cap) return NULL;
	J *v = &ps->pool[ps->used++];
	memset(v, 0, sizeof *v);
	char c = *ps->p;
	if (c == '{' || c == '[') {
		int obj = c == '{';
		char close = obj ? '}' : ']';
		J **tail = &v->child;
		v->type = obj ? J_OBJ : J_ARR;
		ps->p++;
		skip_ws(ps);
		if (*ps->p == close) { ps->p++; return v; }
		for (;;) {
			char *key = NULL;
			if (obj) {
				skip_ws(ps);
				if (*ps->p != '"' || !(key = parse_string(ps))) return NULL;
				skip_ws(ps);
				if (*ps->p++ != ':') return NULL;
			}
			J *item = parse_value(ps);
			if (!item) return NULL;
			item->key = key;
			*tail = item;
			tail = &item->next;
			skip_ws(ps);
			if (*ps->p == ',') { ps->p++; continue; }
			if (*ps->p == close) { ps->p++; return v; }
			return NULL;
		}
	}
	if (c == '"') {
		v->type = J_STR;
		return (v->str = parse_string(ps)) ? v : NULL;
	}
	if (!strncmp(ps->p, "true", 4) || !strncmp(ps->p, "false", 5)) {
		v->type = J_BOOL;
		v->num = *ps->p == 't';
		ps->p += *ps->p == 't' ? 4 : 5;
		return v;
	}
	if (!strncmp(ps->p, "null", 4)) { ps->p += 4; return v; }
	char *end;
	v->type = J_NUM;
	v->num = strtod(ps->p, &end);
	if (end == ps->p) return NULL;
	ps->p = end;
	return v;
}

static J *get(const J *obj, const char *key)
{
	if (!obj || obj->type != J_OBJ) return NULL;
	for (J *c = obj->child; c; c = c->next)
		if (!strcmp(c->key, key)) return c;
	return NULL;
}

/* A number, or dflt when absent or null. */
static long long num(const J *obj, const char *key, long long dflt)
{
	J *v = get(obj, key);
	return v && (v->type == J_NUM || v->type == J_BOOL) ? (long long)v->num : dflt;
}

/* Copies a string member into dst; leaves dst (the default) alone when absent. */
static void str(const J *obj, const char *key, char *dst, size_t n)
{
	J *v = get(obj, key);
	if (v && v->type == J_STR) snprintf(dst, n, "%s", v->str);
}

/* --------------------------------------------------------------------- state model -- */

#define MAXGPU 64
#define MAXPROC 128
#define MAXERR 32
#define MAXMIG 8
#define MAXXID 64
#define NA (-1LL) /* reading absent: NOT_SUPPORTED */

typedef struct { unsigned pid; unsigned long long mem; int compute, graphics; } Proc;
typedef struct { char fn[80]; int code; } Err;
typedef struct { int n; Err e[MAXERR]; } Errs;
typedef struct {
	char uuid[96], name[96], bus[32];
	long long minor, pci_device_id, mem_total, mem_used, mem_reserved, util, mem_util, power_mw, power_limit_mw,
		temp, pstate, fan, clocks_event_reasons, sm_clock, mem_clock, energy_mj, memory_temp,
		pcie_tx_bytes, pcie_rx_bytes, pcie_replay, enc_util, dec_util, nvlink_tx_kib, nvlink_rx_kib;
	long long xid[MAXXID];
	int nproc, nmig, nxid; /* nxid -1: no "xid" key, XID events not supported */
	Proc procs[MAXPROC];
	char mig[MAXMIG][96];
	Errs errs;
} Gpu;
typedef struct { char driver[80]; long long cuda; int ngpu; Gpu gpu[MAXGPU]; Errs errs; } State;

static State st;
static int init_count;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
struct nvmlDevice_st { int index; };
typedef struct nvmlDevice_st *nvmlDevice_t;
static struct nvmlDevice_st handles[MAXGPU];
static struct nvmlDevice_st mig_handles[MAXGPU][MAXMIG]; /* .index: the parent GPU */

static int error_code(const J *v)
{
	if (v->type == J_NUM) return (int)v->num;
	if (v->type == J_STR)
		for (size_t i = 0; i < sizeof ERRORS / sizeof *ERRORS; i++)
			if (!strcmp(v->str, ERRORS[i].name)) return ERRORS[i].code;
	return E_UNKNOWN;
}

static void read_errors(const J *obj, Errs *errs)
{
	errs->n = 0;
	for (J *c = obj ? obj->child : NULL; c && errs->n < MAXERR; c = c->next) {
		if (!c->key || c->type == J_NULL) continue;
		snprintf(errs->e[errs->n].fn, sizeof errs->e[0].fn, "%s", c->key);
		errs->e[errs->n++].code = error_code(c);
	}
}

/* The error injected for function fn ("nvmlX_v3" also matches a key "nvmlX"), or OK. */
static nvmlReturn_t injected(const Errs *errs, const char *fn)
{
	size_t base = strlen(fn);
	const char *v = strrchr(fn, '_');
	if (v && v[1] == 'v' && isdigit((unsigned char)v[2])) base = (size_t)(v - fn);
	for (int i = 0; i < errs->n; i++)
		if (!strcmp(errs->e[i].fn, fn) || (strlen(errs->e[i].fn) == base && !strncmp(errs->e[i].fn, fn, base)))
			return errs->e[i].code;
	for (int i = 0; i < errs->n; i++)
		if (!strcmp(errs->e[i].fn, "*")) return errs->e[i].code;
	return OK;
}

static Gpu *gpu_by_uuid(const char *uuid)
{
	for (int i = 0; i < st.ngpu; i++)
		if (!strcmp(st.gpu[i].uuid, uuid)) return &st.gpu[i];
	return NULL;
}

static void add_proc(Gpu *g, unsigned pid, unsigned long long mem, const char *kind)
{
	if (g->nproc >= MAXPROC) return;
	Proc *p = &g->procs[g->nproc++];
	p->pid = pid;
	p->mem = mem;
	p->compute = strstr(kind, "compute") != NULL;
	p->graphics = strstr(kind, "graphics") != NULL;
}

static int alive(unsigned pid)
{
	if (kill((pid_t)pid, 0) != 0 && errno != EPERM) return 0;
	char path[64], buf[512];
	snprintf(path, sizeof path, "/proc/%u/stat", pid);
	FILE *f = fopen(path, "r");
	if (!f) return 1;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	char *paren = strrchr(buf, ')'); /* "pid (comm) S ..." */
	return !(paren && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X'));
}

static void add_live_processes(const char *state_path)
{
	char dir[4096];
	const char *env = getenv("FAKE_NVML_PROCS");
	if (env && *env) snprintf(dir, sizeof dir, "%s", env);
	else snprintf(dir, sizeof dir, "%s.procs", state_path);
	DIR *d = opendir(dir);
	if (!d) return;
	struct dirent *de;
	while ((de = readdir(d))) {
		char *end;
		unsigned long pid = strtoul(de->d_name, &end, 10);
		if (!isdigit((unsigned char)de->d_name[0]) || *end || !alive((unsigned)pid)) continue;
		char path[8192], line[512];
		snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
		FILE *f = fopen(path, "r");
		if (!f) continue;
		while (fgets(line, sizeof line, f)) {
			char uuid[96], kind[32] = "compute";
			unsigned long long mem;
			long long util = 0, mem_util = 0;
			if (sscanf(line, "%95s %llu %lld %lld %31s", uuid, &mem, &util, &mem_util, kind) < 2)
				continue;
			Gpu *g = gpu_by_uuid(uuid);
			if (!g) continue;
			add_proc(g, (unsigned)pid, mem, kind);
			if (g->mem_used != NA) g->mem_used += (long long)mem;
			if (g->util != NA) g->util = g->util + util > 100 ? 100 : g->util + util;
			if (g->mem_util != NA)
				g->mem_util = g->mem_util + mem_util > 100 ? 100 : g->mem_util + mem_util;
		}
		fclose(f);
	}
	closedir(d);
}

/* The readings behind the DCGM exporter's names (clocks, energy, PCIe, NVLink, XIDs). */
static void read_telemetry(const J *g, Gpu *d)
{
	d->sm_clock = num(g, "sm_clock", NA);
	d->mem_clock = num(g, "mem_clock", NA);
	d->energy_mj = num(g, "energy_mj", NA);
	d->memory_temp = num(g, "memory_temp", NA);
	d->pcie_tx_bytes = num(g, "pcie_tx_bytes", NA);
	d->pcie_rx_bytes = num(g, "pcie_rx_bytes", NA);
	d->pcie_replay = num(g, "pcie_replay", NA);
	d->enc_util = num(g, "enc_util", NA);
	d->dec_util = num(g, "dec_util", NA);
	d->nvlink_tx_kib = num(g, "nvlink_tx_kib", NA);
	d->nvlink_rx_kib = num(g, "nvlink_rx_kib", NA);
	J *xids = get(g, "xid");
	d->nxid = xids && xids->type == J_ARR ? 0 : -1;
	for (J *x = d->nxid == 0 ? xids->child : NULL; x && d->nxid < MAXXID; x = x->next)
		if (x->type == J_NUM) d->xid[d->nxid++] = (long long)x->num;
}

/* Re-reads the state file into st. */
static nvmlReturn_t load(void)
{
	const char *path = getenv("FAKE_NVML_STATE");
	FILE *f = path && *path ? fopen(path, "rb") : NULL;
	if (!f) return E_DRIVER_NOT_LOADED;
	size_t cap = 1 << 16, len = 0;
	char *buf = malloc(cap);
	size_t n;
	while (buf && (n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
		len += n;
		if (len + 1 == cap) buf = realloc(buf, cap *= 2);
	}
	fclose(f);
	if (!buf) return E_UNKNOWN;
	buf[len] = '\0';
	Parser ps = {buf, calloc(len + 2, sizeof(J)), 0, len + 2};
	J *root = ps.pool ? parse_value(&ps) : NULL;
	if (root) skip_ws(&ps);
	if (!root || root->type != J_OBJ || *ps.p) {
		fprintf(stderr, "fakenvml: malformed state file %s near offset %ld\n", path,
			(long)(ps.p - buf));
		free(ps.pool);
		free(buf);
		return E_UNKNOWN;
	}
	memset(&st, 0, sizeof st);
	strcpy(st.driver, "550.54.15");
	str(root, "driver", st.driver, sizeof st.driver);
	st.cuda = num(root, "cuda", 12040);
	read_errors(get(root, "errors"), &st.errs);
	J *gpus = get(root, "gpus");
	for (J *g = gpus && gpus->type == J_ARR ? gpus->child : NULL; g && st.ngpu < MAXGPU; g = g->next) {
		Gpu *d = &st.gpu[st.ngpu];
		snprintf(d->uuid, sizeof d->uuid, "GPU-00000000-0000-0000-0000-%012d", st.ngpu);
		str(g, "uuid", d->uuid, sizeof d->uuid);
		strcpy(d->name, "NVIDIA A100-SXM4-80GB");
		str(g, "name", d->name, sizeof d->name);
		snprintf(d->bus, sizeof d->bus, "00000000:%02X:00.0", st.ngpu + 1);
		str(g, "pci_bus_id", d->bus, sizeof d->bus);
		d->pci_device_id = num(g, "pci_device_id", 0x20B210DE);
		d->minor = num(g, "minor", st.ngpu);
		d->mem_total = num(g, "memory_total", NA);
		d->mem_used = d->mem_total == NA ? NA : num(g, "memory_used", 0);
		d->mem_reserved = num(g, "memory_reserved", 0);
		d->util = num(g, "util", NA);
		d->mem_util = num(g, "mem_util", NA);
		d->power_mw = num(g, "power_mw", NA);
		d->power_limit_mw = num(g, "power_limit_mw", NA);
		d->temp = num(g, "temp", NA);
		d->pstate = num(g, "pstate", NA);
		d->fan = num(g, "fan", NA);
		d->clocks_event_reasons = num(g, "clocks_event_reasons", NA);
		read_telemetry(g, d);
		read_errors(get(g, "errors"), &d->errs);
		J *migs = get(g, "mig");
		for (J *m = migs && migs->type == J_ARR ? migs->child : NULL; m && d->nmig < MAXMIG; m = m->next)
			if (m->type == J_STR) snprintf(d->mig[d->nmig++], sizeof d->mig[0], "%s", m->str);
		J *procs = get(g, "processes");
		for (J *p = procs && procs->type == J_ARR ? procs->child : NULL; p; p = p->next) {
			char kind[32] = "compute";
			str(p, "type", kind, sizeof kind);
			add_proc(d, (unsigned)num(p, "pid", 0), (unsigned long long)num(p, "used_memory", -1), kind);
		}
		st.ngpu++;
	}
	add_live_processes(path);
	free(ps.pool);
	free(buf);
	return OK;
}

/* ------------------------------------------------------------------ call framework -- */

static void count_call(const char *fn)
{
	const char *path = getenv("FAKE_NVML_CALLS");
	FILE *f = path && *path ? fopen(path, "a") : NULL;
	if (!f) return;
	fprintf(f, "%s %d\n", fn, (int)getpid());
	fclose(f);
}

/* Every entry point: lock, count the call (as fn), (re)load the state, check the injection
 * for inject ("": none at system level); end() unlocks. */
static nvmlReturn_t begin(const char *fn, const char *inject)
{
	pthread_mutex_lock(&mu);
	count_call(fn);
	if (!init_count) return E_UNINITIALIZED;
	nvmlReturn_t rc = load();
	return rc ? (rc == E_DRIVER_NOT_LOADED ? E_UNKNOWN : rc) : injected(&st.errs, inject);
}

static nvmlReturn_t sys_begin(const char *fn) { return begin(fn, fn); }

static nvmlReturn_t dev_begin(const char *fn, nvmlDevice_t h, Gpu **g)
{
	nvmlReturn_t rc = begin(fn, "");
	if (rc) return rc;
	if (!h || h < handles || h >= handles + MAXGPU) return E_INVALID_ARGUMENT;
	if (h->index >= st.ngpu) return E_GPU_IS_LOST; /* removed from the state file */
	*g = &st.gpu[h->index];
	return injected(&(*g)->errs, fn);
}

static nvmlReturn_t end(nvmlReturn_t rc)
{
	pthread_mutex_unlock(&mu);
	return rc;
}

static nvmlReturn_t copy_str(char *dst, unsigned len, const char *src)
{
	if (!dst) return E_INVALID_ARGUMENT;
	if (strlen(src) + 1 > len) return E_INSUFFICIENT_SIZE;
	strcpy(dst, src);
	return OK;
}

static nvmlReturn_t reading(long long value, unsigned *out)
{
	if (!out) return E_INVALID_ARGUMENT;
	if (value == NA) return E_NOT_SUPPORTED;
	*out = (unsigned)value;
	return OK;
}

static void log_call(const char *what)
{
	const char *path = getenv("FAKE_NVML_LOG");
	FILE *f = path && *path ? fopen(path, "a") : NULL;
	if (!f) return;
	fprintf(f, "%s %d\n", what, (int)getpid());
	fclose(f);
}

/* ------------------------------------------------------------------------- the API -- */

nvmlReturn_t nvmlInitWithFlags(unsigned int flags)
{
	(void)flags;
	pthread_mutex_lock(&mu);
	count_call(__func__);
	nvmlReturn_t rc = load();
	if (!rc) rc = injected(&st.errs, "nvmlInitWithFlags");
	if (!rc) rc = injected(&st.errs, "nvmlInit");
	if (!rc) init_count++;
	log_call(rc ? "init-failed" : "init");
	return end(rc);
}

nvmlReturn_t nvmlInit_v2(void) { return nvmlInitWithFlags(0); }
nvmlReturn_t nvmlInit(void) { return nvmlInitWithFlags(0); }

nvmlReturn_t nvmlShutdown(void)
{
	pthread_mutex_lock(&mu);
	count_call(__func__);
	if (!init_count) return end(E_UNINITIALIZED);
	init_count--;
	log_call("shutdown");
	return end(OK);
}

const char *nvmlErrorString(nvmlReturn_t rc)
{
	for (size_t i = 0; i < sizeof ERRORS / sizeof *ERRORS; i++)
		if (ERRORS[i].code == rc) return ERRORS[i].text;
	return "Unknown Error";
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int len)
{
	nvmlReturn_t rc = sys_begin(__func__);
	return end(rc ? rc : copy_str(version, len, st.driver));
}

nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int len)
{
	char buf[128];
	nvmlReturn_t rc = sys_begin(__func__);
	snprintf(buf, sizeof buf, "%lld.%s", st.cuda / 1000, st.driver);
	return end(rc ? rc : copy_str(version, len, buf));
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *version)
{
	nvmlReturn_t rc = sys_begin(__func__);
	if (!rc) *version = (int)st.cuda;
	return end(rc);
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *version)
{
	return nvmlSystemGetCudaDriverVersion(version);
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count)
{
	nvmlReturn_t rc = sys_begin(__func__);
	if (!rc) *count = (unsigned)st.ngpu;
	return end(rc);
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
	nvmlReturn_t rc = begin(__func__, "");
	if (!rc && index >= (unsigned)st.ngpu) rc = E_INVALID_ARGUMENT;
	if (!rc) rc = injected(&st.gpu[index].errs, __func__);
	if (!rc) {
		handles[index].index = (int)index;
		*device = &handles[index];
	}
	return end(rc);
}

nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device)
{
	nvmlReturn_t rc = begin(__func__, "");
	for (int i = 0; !rc && uuid && i < st.ngpu; i++)
		for (int k = 0; k < st.gpu[i].nmig; k++)
			if (!strcmp(st.gpu[i].mig[k], uuid)) {
				mig_handles[i][k].index = i;
				*device = &mig_handles[i][k];
				return end(OK);
			}
	Gpu *g = rc || !uuid ? NULL : gpu_by_uuid(uuid);
	if (!rc) rc = !uuid ? E_INVALID_ARGUMENT : !g ? E_NOT_FOUND : injected(&g->errs, __func__);
	if (!rc) {
		int index = (int)(g - st.gpu);
		handles[index].index = index;
		*device = &handles[index];
	}
	return end(rc);
}

nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t mig, nvmlDevice_t *device)
{
	nvmlReturn_t rc = begin(__func__, "");
	struct nvmlDevice_st *first = &mig_handles[0][0];
	if (!rc && (!mig || mig < first || mig >= first + MAXGPU * MAXMIG)) rc = E_INVALID_ARGUMENT;
	if (!rc && mig->index >= st.ngpu) rc = E_GPU_IS_LOST;
	if (!rc) {
		handles[mig->index].index = mig->index;
		*device = &handles[mig->index];
	}
	return end(rc);
}

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t h, unsigned int *index)
{
	Gpu *g;
	nvmlReturn_t rc = dev_begin(__func__, h, &g);
	if (!rc) *index = (unsigned)(g - st.gpu);
	return end(rc);
}

nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t h, unsigned int *minor)
{
	Gpu *g;
	nvmlReturn_t rc = dev_begin(__func__, h, &g);
	if (!rc) *minor = (unsigned)g->minor;
	return end(rc);
}

/* MIG mode (current and pending): enabled on a GPU whose state lists MIG devices ("mig"). */
nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t h, unsigned int *current, unsigned int *pending)
{
	Gpu *g;
	nvmlReturn_t rc = dev_begin(__func__, h, &g);
	if (!rc && (!current || !pending)) rc = E_INVALID_ARGUMENT;
	if (!rc) *current = *pending = g->nmig > 0;
	return end(rc);
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t h, char *uuid, unsigned int len)
{
	Gpu *g;
	nvmlReturn_t rc = dev_begin(__func__, h, &g);
	return end(rc ? rc : copy_str(uuid, len, g->uuid));
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t h, char *name, unsigned int len)
{
	Gpu *g;
	nvmlReturn_t rc = dev_begin(__func__, h, &g);
	return end(rc ? rc : copy_str(name, len, g->name));
}

typedef struct {
	char busIdLegacy[16];
	unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
	char busId[32];
} nvmlPciInfo_t;

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t h, nvmlPciInfo_t *pci)
{
	Gpu *g;
	nvmlReturn_t rc = dev_begin(__func__, h, &g);
	if (!rc) {
		unsigned dom = 0, bus = 0, dev = 0, fn = 0;
		sscanf(g->bus, "%x:%x:%x.%x", &dom, &bus, &dev, &fn);
		memset(pci, 0, sizeof *pci);
		snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04X:%02X:%02X.%X", dom & 0xFFFF, bus, dev, fn);
		snprintf(pci->busId, sizeof pci->busId, "%s", g->bus);
		pci->domain = dom;
		pci->bus = bus;
		pci->device = dev;
		pci->pciDeviceId = (unsigned)g->pci_device_id;
		pci->pciSubSystemId = 0x145F10DE;
	}
	return end(rc);
}

typedef struct { unsigned long long total, free, used; } nvmlMemory_t;
typedef struct { unsigned int version; unsigned long long total, reserved, free, used; } nvmlMemory_v2_t;

/* As the real driver (580, seen on an H200, issue 37): the memory it reserves for itself
   ("memory_reserved", ~615 MiB there) is "used" in v1 and apart in v2, whose "used" is what
   nvidia-smi shows (0 on an idle GPU); "free" is the same in both. */
static unsigned long long mem_free(const Gpu *g)
{
	long long taken = g->mem_used + g->mem_reserved;
	return taken >= g->mem_total ? 0 : (unsigned long long)(g->mem_total - taken);
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t h, nvmlMemory_t *mem)
{
	Gpu *g;
	nvmlReturn_t rc = dev_begin(__func__, h, &g);
	if (!rc && g->mem_total == NA) rc = E_NOT_SUPPORTED;
	if (!rc) {
		mem->total = (unsigned long long)g->mem_total;
		mem->used = (unsigned long long)(g->mem_used + g->mem_reserved);
		mem->free = mem_free(g);
	}
	return end(rc);
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t h, nvmlMemory_v2_t *mem)
{
	Gpu *g;
	nvmlReturn_t rc = dev_begin(__func__, h, &g);
	if (!rc && mem->version != 0x02000028) rc = E_ARGUMENT_VERSION_MISMATCH;
	if (!rc && g->mem_total == NA) rc = E_NOT_SUPPORTED;
	if (!rc) {
		mem->total = (unsigned long long)g->mem_total;
		mem->reserved = (unsigned long long)g->mem_reserved;
		mem->used = (unsigned long long)g->mem_used;
		mem->free = mem_free(g);
	}
	return end(rc);
}

typedef struct { unsigned int gpu, memory; } nvmlUtilization_t;

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t h, nvmlUtilization_t *util)
{
	Gpu *g;
	nvmlReturn_t rc = dev_begin(__func__, h, &g);
	if (!rc && (g->util == NA || g->mem_util == NA)) rc = E_NOT_SUPPORTED;
	if (!rc) {
		util->gpu = (unsigned)g->util;
		util->memory = (unsigned)g->mem_util;
	}
	return end(rc);
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t h, unsigned int *mw)
{
	Gpu *g;
	nvmlReturn_t rc = dev_begin(__func__, h, &g);
	return end(rc ? rc : reading(g->power_mw, mw));
}

nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t h, unsigned int *mw)
{
	Gpu *g;
	nvmlReturn_t rc = dev_begin(__func__, h, &g);
	return end(rc ? rc : reading(g->power_limit_mw, mw));
}

nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t h, unsigned int *mw)
{
	Gpu *g;
	nvmlReturn_t rc = dev_begin(__func__, h, &g);
	return end(rc ? rc : reading(g->power_limit_mw, mw));
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t h, int sensor, unsigned int *temp)
{
	Gpu *g;
	nvmlReturn_t rc = dev_begin(__func__, h, &g);
	if (!rc && sensor != 0) rc = E_INVALID_ARGUMENT; /* only NVML_TEMPERATURE_GPU */
	return end(rc ? rc : reading(g->temp, temp));
}

nvmlReturn_t nvmlDeviceGetFanSpeed(nvmlDevice_t h, unsigned int *speed)
{
	Gpu *g;
	nvmlReturn_t rc = dev_begin(__func__, h, &g);
	return end(rc ? rc : reading(g->fan, speed));
}

static nvmlReturn_t event_reasons(const char *fn, nvmlDevice_t h, unsigned long long *reasons)
{
	Gpu *g;
	nvmlReturn_t rc = dev_begin(fn, h, &g);
	if (!rc && !reasons) rc = E_INVALID_ARGUMENT;
	if (!rc && g->clocks_event_reasons == NA) rc = E_NOT_SUPPORTED;
	if (!rc) *reasons = (unsigned long long)g->clocks_event_reasons;
	return end(rc);
}

nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t h, unsigned long long *reasons)
{
	return event_reasons(__func__, h, reasons);
}

nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t h, unsigned long long *reasons)
{
	return event_reasons(__func__, h, reasons);
}

nvmlReturn_t nvmlDeviceGetPerformanceState(nvmlDevice_t h, int *pstate)
{
	Gpu *g;
	nvmlReturn_t rc = dev_begin(__func__, h, &g);
	if (!rc && g->pstate == NA) rc = E_NOT_SUPPORTED;
	if (!rc) *pstate = (int)g->pstate;
	return end(rc);
}

typedef struct {
	unsigned int pid;
	unsigned long long usedGpuMemory;
	unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_t;

/* NVML's two-call protocol: too small a buffer gets the needed count and INSUFFICIENT_SIZE. */
static nvmlReturn_t list_procs(const char *fn, nvmlDevice_t h, unsigned *count,
			       nvmlProcessInfo_t *infos, int graphics)
{
	Gpu *g;
	nvmlReturn_t rc = dev_begin(fn, h, &g);
	if (rc) return end(rc);
	if (!count) return end(E_INVALID_ARGUMENT);
	unsigned n = 0;
	for (int i = 0; i < g->nproc; i++) {
		const Proc *p = &g->procs[i];
		if (!(graphics ? p->graphics : p->compute)) continue;
		if (infos && n < *count) {
			infos[n].pid = p->pid;
			infos[n].usedGpuMemory = p->mem;
			infos[n].gpuInstanceId = infos[n].computeInstanceId = 0xFFFFFFFFu;
		}
		n++;
	}
	rc = n > *count || (n && !infos) ? E_INSUFFICIENT_SIZE : OK;
	*count = n;
	return end(rc);
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t h, unsigned int *count,
						     nvmlProcessInfo_t *infos)
{
	return list_procs(__func__, h, count, infos, 0);
}

nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t h, unsigned int *count,
						      nvmlProcessInfo_t *infos)
{
	return list_procs(__func__, h, count, infos, 1);
}

/* ---------------------------------------------- DCGM exporter's readings (telemetry) -- */

nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t h, int type, unsigned int *clock)
{
	Gpu *g;
	nvmlReturn_t rc = dev_begin(__func__, h, &g);
	if (rc) return end(rc);
	if (type == 1) return end(reading(g->sm_clock, clock)); /* NVML_CLOCK_SM */
	if (type == 2) return end(reading(g->mem_clock, clock)); /* NVML_CLOCK_MEM */
	return end(E_NOT_SUPPORTED);
}

nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t h, unsigned long long *mj)
{
	Gpu *g;
	nvmlReturn_t rc = dev_begin(__func__, h, &g);
	if (!rc && !mj) rc = E_INVALID_ARGUMENT;
	if (!rc && g->energy_mj == NA) rc = E_NOT_SUPPORTED;
	if (!rc) *mj = (unsigned long long)g->energy_mj;
	return end(rc);
}

nvmlReturn_t nvmlDeviceGetPcieReplayCounter(nvmlDevice_t h, unsigned int *count)
{
	Gpu *g;
	nvmlReturn_t rc = dev_begin(__func__, h, &g);
	return end(rc ? rc : reading(g->pcie_replay, count));
}

static nvmlReturn_t codec_util(const char *fn, nvmlDevice_t h, int enc, unsigned *util, unsigned *period)
{
	Gpu *g;
	nvmlReturn_t rc = dev_begin(fn, h, &g);
	if (!rc && !period) rc = E_INVALID_ARGUMENT;
	if (!rc) rc = reading(enc ? g->enc_util : g->dec_util, util);
	if (!rc) *period = 167000;
	return end(rc);
}

nvmlReturn_t nvmlDeviceGetEncoderUtilization(nvmlDevice_t h, unsigned int *util, unsigned int *period)
{
	return codec_util(__func__, h, 1, util, period);
}

nvmlReturn_t nvmlDeviceGetDecoderUtilization(nvmlDevice_t h, unsigned int *util, unsigned int *period)
{
	return codec_util(__func__, h, 0, util, period);
}

typedef struct {
	unsigned int fieldId, scopeId;
	long long timestamp, latencyUsec;
	int valueType; /* NVML_VALUE_TYPE_UNSIGNED_LONG_LONG = 3 */
	nvmlReturn_t nvmlReturn;
	union { double d; unsigned int ui; unsigned long ul; unsigned long long ull; long long sll; } value;
} nvmlFieldValue_t;

nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t h, int count, nvmlFieldValue_t *values)
{
	Gpu *g;
	nvmlReturn_t rc = dev_begin(__func__, h, &g);
	if (!rc && (count < 0 || (count && !values))) rc = E_INVALID_ARGUMENT;
	for (int i = 0; !rc && i < count; i++) {
		nvmlFieldValue_t *v = &values[i];
		long long x = v->fieldId == 82 ? g->memory_temp    /* NVML_FI_DEV_MEMORY_TEMP */
			: v->fieldId == 197 ? g->pcie_tx_bytes      /* NVML_FI_DEV_PCIE_COUNT_TX_BYTES */
			: v->fieldId == 198 ? g->pcie_rx_bytes      /* ..._RX_BYTES */
			: v->fieldId == 138 ? g->nvlink_tx_kib      /* NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX */
			: v->fieldId == 139 ? g->nvlink_rx_kib      /* ..._RX */
			: v->fieldId == 185 ? g->power_mw           /* NVML_FI_DEV_POWER_AVERAGE */
			: v->fieldId == 190 ? g->power_limit_mw : NA; /* NVML_FI_DEV_POWER_CURRENT_LIMIT */
		/* The power fields answer as the calls they stand for do (their injected errors). */
		nvmlReturn_t err = v->fieldId == 185 ? injected(&g->errs, "nvmlDeviceGetPowerUsage")
			: v->fieldId == 190 ? injected(&g->errs, "nvmlDeviceGetEnforcedPowerLimit") : OK;
		v->valueType = 3;
		v->nvmlReturn = err ? err : x == NA ? E_NOT_SUPPORTED : OK;
		v->value.ull = x == NA ? 0 : (unsigned long long)x;
	}
	return end(rc);
}

/* Event sets: which GPUs registered for XID events, and how many of their XIDs were given. */
struct nvmlEventSet_st { int registered[MAXGPU]; int given[MAXGPU]; };
typedef struct nvmlEventSet_st *nvmlEventSet_t;
typedef struct {
	nvmlDevice_t device;
	unsigned long long eventType, eventData;
	unsigned int gpuInstanceId, computeInstanceId;
} nvmlEventData_t;
#define XID_EVENT 8ULL /* nvmlEventTypeXidCriticalError */

nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set)
{
	nvmlReturn_t rc = sys_begin(__func__);
	if (!rc && !set) rc = E_INVALID_ARGUMENT;
	if (!rc) *set = calloc(1, sizeof **set);
	if (!rc && !*set) rc = E_UNKNOWN;
	return end(rc);
}

nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set)
{
	free(set);
	return OK;
}

nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t h, unsigned long long *types)
{
	Gpu *g;
	nvmlReturn_t rc = dev_begin(__func__, h, &g);
	if (!rc && !types) rc = E_INVALID_ARGUMENT;
	if (!rc) *types = g->nxid < 0 ? 0 : XID_EVENT;
	return end(rc);
}

nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t h, unsigned long long types, nvmlEventSet_t set)
{
	Gpu *g;
	nvmlReturn_t rc = dev_begin(__func__, h, &g);
	if (!rc && !set) rc = E_INVALID_ARGUMENT;
	if (!rc && (types & ~XID_EVENT || g->nxid < 0)) rc = E_NOT_SUPPORTED;
	if (!rc && types) {
		set->registered[h->index] = 1;
		set->given[h->index] = g->nxid; /* only what comes after registering */
	}
	return end(rc);
}

nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeout_ms)
{
	(void)timeout_ms; /* never blocks: a test changes the state file between waits */
	nvmlReturn_t rc = sys_begin(__func__);
	if (!rc && (!set || !data)) rc = E_INVALID_ARGUMENT;
	for (int i = 0; !rc && i < st.ngpu; i++) {
		if (!set->registered[i] || st.gpu[i].nxid <= set->given[i]) continue;
		handles[i].index = i;
		data->device = &handles[i];
		data->eventType = XID_EVENT;
		data->eventData = (unsigned long long)st.gpu[i].xid[set->given[i]++];
		data->gpuInstanceId = data->computeInstanceId = 0xFFFFFFFFu;
		return end(OK);
	}
	return end(rc ? rc : 10); /* NVML_ERROR_TIMEOUT */
}
