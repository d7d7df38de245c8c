#ifndef EP_DISPATCH_H
#define EP_DISPATCH_H
#include "ep_kernel.h"
const ep_kernel *ep_kernel_for(uint32_t op);
#endif
