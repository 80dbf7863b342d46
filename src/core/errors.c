/* errors.c - lite_strerror(): one name for every code the library returns. */
#include <string.h>

#include "lite_int.h"

LITE_API const char *lite_strerror(int code)
{
    if (code == 0)
        return "success";
    int c = code < 0 ? -code : code;
    switch (c) {
    case LITE_ERR_PEER_LOST:
        return "peer lost";
    case LITE_ERR_PROTOCOL:
        return "protocol error (malformed data from peer)";
    case LITE_ERR_TRUNCATED:
        return "message truncated (longer than the receive buffer)";
    case LITE_ERR_CANCELLED:
        return "operation cancelled";
    case LITE_ERR_REMOTE:
        return "operation refused by the remote side";
    case LITE_ERR_TAG_ORDER:
        return "tag order violation (tags to a peer must strictly increase)";
    case LITE_ERR_CONFIG:
        return "invalid configuration";
    case LITE_ERR_NO_TRANSPORT:
        return "transport not available";
    case LITE_ERR_REMOTE_KEY:
        return "remote region key unknown or stale";
    case LITE_ERR_REMOTE_BOUNDS:
        return "range outside the remote region";
    case LITE_ERR_REMOTE_ACCESS:
        return "remote region does not grant that access";
    default:
        break;
    }
    if (c > LITE_ERR_BASE)
        return "unknown liblitetx error";
    /* strerror() is not thread-safe for unknown codes; the known ones are static strings. */
    return strerror(c);
}

LITE_API const char *lite_version(void)
{
    return "0.1.0";
}
