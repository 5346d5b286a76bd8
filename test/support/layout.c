/* Prints the ring layout as the C compiler sees it, for the test that holds src/ffi/ring.ts to it. */
#include "gpumem_ring.h"
#include <stddef.h>
#include <stdio.h>

int main(void) {
  printf("{\"abi\":%u,\"header_size\":%u,\"record_size\":%u,\"max_devices\":%u,", GPUMEM_RING_ABI_VERSION,
         GPUMEM_HEADER_SIZE, GPUMEM_RECORD_SIZE, GPUMEM_MAX_DEVICES);
  printf("\"write_index\":%zu,\"totals\":%zu,\"totals_size\":%zu,", offsetof(gpumem_header, write_index),
         offsetof(gpumem_header, totals), sizeof(gpumem_totals));
  printf("\"pid\":%zu,\"mode\":%zu,\"attach_ns\":%zu,\"updated_ns\":%zu,\"cur_step\":%zu,\"cur_range\":%zu,"
         "\"cur_phase\":%zu,\"closed\":%zu,\"n_devices\":%zu,\"capacity\":%zu,\"n_retries\":%zu,\"requested\":%zu,"
         "\"cur_line\":%zu,\"record_line\":%zu}\n",
         offsetof(gpumem_header, pid), offsetof(gpumem_header, mode), offsetof(gpumem_header, attach_ns),
         offsetof(gpumem_header, updated_ns), offsetof(gpumem_header, cur_step), offsetof(gpumem_header, cur_range),
         offsetof(gpumem_header, cur_phase), offsetof(gpumem_header, closed), offsetof(gpumem_header, n_devices),
         offsetof(gpumem_header, capacity), offsetof(gpumem_totals, n_retries),
         offsetof(gpumem_totals, requested), offsetof(gpumem_header, cur_line), offsetof(gpumem_record, line));
  return 0;
}
