// Which functions of an executable run, and in what order: the training step of
// scripts/build-release.sh, never part of `netreach` itself.
//
// Loaded with LD_PRELOAD into the executable just linked (HOT_FUNCTIONS_EXE names it: in any other
// program the variables reach, such as a shell, the library does nothing). Before the executable's
// own code runs, it writes a breakpoint (int3) over the first byte of every function listed in
// HOT_FUNCTIONS_IN (one hexadecimal address per line, as the ELF file gives them); the first time
// a function is entered, the trap handler puts the byte back, writes the function's address to HOT_FUNCTIONS_OUT
// (one line, with write(2), so a run ended by a signal loses nothing) and lets the call go on.
// Each function is reported once, the first time any thread enters it.
//
//   cc -shared -fPIC -O2 -o hot-functions.so scripts/hot-functions.c
//   export HOT_FUNCTIONS_EXE=$PWD/netreach HOT_FUNCTIONS_IN=entries.txt HOT_FUNCTIONS_OUT=hits.txt
//   LD_PRELOAD=$PWD/hot-functions.so ./netreach watch
//
// The text stays writable for the whole run (one mprotect at the start), so a trap never has to
// change the protection of a page another thread is executing. x86-64 only: on another
// architecture the library does nothing and the build keeps its default order.
#define _GNU_SOURCE
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <ucontext.h>
#include <unistd.h>

#if defined(__x86_64__)

static uintptr_t load_bias, text_start, text_end;
static uintptr_t *entries;    // sorted run-time addresses
static unsigned char *saved;  // each entry's first byte
static unsigned char *reported;
static size_t entry_count;
static int output = -1;

static long find(uintptr_t address) {
    size_t low = 0, high = entry_count;
    while (low < high) {
        size_t middle = low + (high - low) / 2;
        if (entries[middle] < address) low = middle + 1;
        else high = middle;
    }
    return (low < entry_count && entries[low] == address) ? (long)low : -1;
}

static void report(uintptr_t address) {
    char line[24];
    char digits[20];
    int count = 0, length = 0;
    uintptr_t value = address - load_bias;
    do {
        digits[count++] = "0123456789abcdef"[value & 15];
        value >>= 4;
    } while (value != 0);
    while (count > 0) line[length++] = digits[--count];
    line[length++] = '\n';
    ssize_t ignored = write(output, line, (size_t)length);
    (void)ignored;
}

static void on_trap(int signal_number, siginfo_t *info, void *context) {
    (void)info;
    ucontext_t *state = context;
    uintptr_t address = (uintptr_t)state->uc_mcontext.gregs[REG_RIP] - 1;
    long index = find(address);
    if (index < 0) {
        // Not one of ours: a real breakpoint. Fall back to the default action.
        signal(signal_number, SIG_DFL);
        raise(signal_number);
        return;
    }
    // Another thread may have restored the byte first; either way, run the function again.
    __atomic_store_n((unsigned char *)address, saved[index], __ATOMIC_SEQ_CST);
    if (!__atomic_exchange_n(&reported[index], 1, __ATOMIC_SEQ_CST)) report(address);
    state->uc_mcontext.gregs[REG_RIP] = (greg_t)address;
}

static int find_text(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    (void)data;
    if (info->dlpi_name != NULL && info->dlpi_name[0] != '\0') return 0;  // the executable only
    load_bias = info->dlpi_addr;
    for (int index = 0; index < info->dlpi_phnum; index++) {
        const ElfW(Phdr) *header = &info->dlpi_phdr[index];
        if (header->p_type == PT_LOAD && (header->p_flags & PF_X)) {
            text_start = (load_bias + header->p_vaddr) & ~(uintptr_t)4095;
            text_end = (load_bias + header->p_vaddr + header->p_memsz + 4095) & ~(uintptr_t)4095;
        }
    }
    return 1;
}

static int ascending(const void *left, const void *right) {
    uintptr_t a = *(const uintptr_t *)left, b = *(const uintptr_t *)right;
    return (a > b) - (a < b);
}

static int read_entries(const char *path) {
    FILE *file = fopen(path, "r");
    if (file == NULL) return -1;
    size_t capacity = 1 << 16;
    entries = malloc(capacity * sizeof *entries);
    unsigned long long value;
    while (entries != NULL && fscanf(file, "%llx", &value) == 1) {
        uintptr_t address = load_bias + (uintptr_t)value;
        if (address < text_start || address >= text_end) continue;
        if (entry_count == capacity) {
            capacity *= 2;
            uintptr_t *grown = realloc(entries, capacity * sizeof *entries);
            if (grown == NULL) break;
            entries = grown;
        }
        entries[entry_count++] = address;
    }
    fclose(file);
    if (entries == NULL) return -1;
    qsort(entries, entry_count, sizeof *entries, ascending);
    size_t unique = 0;  // aliases share an address: one breakpoint each
    for (size_t index = 0; index < entry_count; index++) {
        if (unique == 0 || entries[unique - 1] != entries[index]) entries[unique++] = entries[index];
    }
    entry_count = unique;
    return 0;
}

__attribute__((constructor)) static void start_tracing(void) {
    const char *input = getenv("HOT_FUNCTIONS_IN");
    const char *output_path = getenv("HOT_FUNCTIONS_OUT");
    const char *executable = getenv("HOT_FUNCTIONS_EXE");
    if (input == NULL || output_path == NULL || executable == NULL) return;
    char wanted[PATH_MAX], running[PATH_MAX];
    if (realpath(executable, wanted) == NULL || realpath("/proc/self/exe", running) == NULL) return;
    if (strcmp(wanted, running) != 0) return;
    dl_iterate_phdr(find_text, NULL);
    if (text_end == 0 || read_entries(input) != 0 || entry_count == 0) return;
    saved = malloc(entry_count);
    reported = calloc(entry_count, 1);
    output = open(output_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (saved == NULL || reported == NULL || output < 0) return;
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = on_trap;
    action.sa_flags = SA_SIGINFO | SA_NODEFER | SA_RESTART;
    if (sigaction(SIGTRAP, &action, NULL) != 0) return;
    if (mprotect((void *)text_start, text_end - text_start, PROT_READ | PROT_WRITE | PROT_EXEC) != 0) return;
    for (size_t index = 0; index < entry_count; index++) {
        unsigned char *first = (unsigned char *)entries[index];
        saved[index] = *first;
        *first = 0xCC;
    }
}

#endif
