/*
 * rdma_err.c - the one place where verbs status codes become liblitetx codes. Everything else in
 * the backend passes the code it gets from here.
 */
#include <errno.h>

#include "transports/rdma/rdma_int.h"

int lite_rdma_wc_code(enum ibv_wc_status st, bool *fatal)
{
    *fatal = false;
    switch (st) {
    case IBV_WC_SUCCESS:
        return 0;
    case IBV_WC_WR_FLUSH_ERR:
        return -LITE_ERR_CANCELLED; /* an earlier WR failed; this one never ran */
    /* The target refused one op (key, bounds, rights, or a request it cannot serve): the
     * connection is re-armed and the op fails with the target's precise reason. */
    case IBV_WC_REM_ACCESS_ERR:
        return -LITE_ERR_REMOTE_ACCESS;
    case IBV_WC_REM_INV_REQ_ERR:
    case IBV_WC_REM_OP_ERR:
        return -LITE_ERR_REMOTE;
    /* This side's own buffer was not usable (bad local key or range). */
    case IBV_WC_LOC_PROT_ERR:
    case IBV_WC_LOC_ACCESS_ERR:
        return -EFAULT;
    case IBV_WC_LOC_LEN_ERR:
        return -LITE_ERR_PROTOCOL; /* a SEND longer than the receive it landed in */
    case IBV_WC_MW_BIND_ERR:
        return -EINVAL;
    /* The peer no longer answers (exited, link down, or its QP is gone), or the connection is
     * broken beyond one op. */
    case IBV_WC_RETRY_EXC_ERR:
    case IBV_WC_RNR_RETRY_EXC_ERR:
    case IBV_WC_RESP_TIMEOUT_ERR:
    case IBV_WC_REM_ABORT_ERR:
    case IBV_WC_BAD_RESP_ERR:
    case IBV_WC_FATAL_ERR:
    case IBV_WC_GENERAL_ERR:
    case IBV_WC_LOC_QP_OP_ERR:
    case IBV_WC_LOC_EEC_OP_ERR:
    case IBV_WC_LOC_RDD_VIOL_ERR:
    case IBV_WC_REM_INV_RD_REQ_ERR:
    case IBV_WC_INV_EECN_ERR:
    case IBV_WC_INV_EEC_STATE_ERR:
    case IBV_WC_TM_ERR:
    case IBV_WC_TM_RNDV_INCOMPLETE:
    default:
        *fatal = true;
        return -LITE_ERR_PEER_LOST;
    }
}

int lite_rdma_errno(int err)
{
    if (err <= 0)
        return err == 0 ? -EIO : err;
    return -err;
}
