/* Weak placeholders so the core links while kernel families land one by one: a plan that uses a
 * kernel whose family is not built in is refused at ep_open with EP_E_OP. Strong definitions in
 * src/kernels/<family>.c replace these. */
#include "ep_kernel.h"
#define EP_PENDING(n, name) \
  __attribute__((weak)) ep_status ep_check_##name(const ep_node *node) { (void)node; return EP_E_OP; } \
  __attribute__((weak)) ep_status ep_run_##name(const ep_node *node) { (void)node; return EP_E_OP; }
EP_OP_LIST(EP_PENDING)
