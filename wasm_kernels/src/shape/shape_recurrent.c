/* Output dims of RECURRENT (src/kernels/recurrent.c): Y [S, D, B, H] and Y_h, Y_c [D, B, H] from XW [S, B, D*G*H],
 * or, with layout 1, Y [B, S, D, H] and Y_h, Y_c [B, D, H] from XW [B, S, D*G*H]. */
#include "ep_shape.h"
EP_COLD_FILE_BEGIN

ep_status ep_shape_RECURRENT(ep_node *n) {
  const ep_tensor *xw = n->in[0];
  const int32_t *p = n->params;
  EP_CHECK(n->n_params >= 4 && p[1] >= 0 && p[1] <= 2 && p[2] >= 1 && (p[3] == 0 || p[3] == 1), EP_E_PARAM);
  EP_CHECK(xw && xw->rank == 3 && n->n_out >= 2 && n->out[0] && n->out[1], EP_E_SHAPE);
  const int32_t D = p[1] == 2 ? 2 : 1, H = p[2], lay = p[3];
  const int32_t S = xw->dims[lay ? 1 : 0], B = xw->dims[lay ? 0 : 1];
  const int32_t y[4] = {lay ? B : S, lay ? S : D, lay ? D : B, H}, h[3] = {lay ? B : D, lay ? D : B, H};
  ep_status st = ep_shape_set(n->out[0], 4, y);
  for (uint32_t k = 1; k < n->n_out && !st; k++) st = n->out[k] ? ep_shape_set(n->out[k], 3, h) : EP_OK;
  return st;
}
EP_COLD_FILE_END
