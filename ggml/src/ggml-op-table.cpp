// ggml-op-table.cpp - one row per op (name, symbol, sources, view / in-place, backward rule).
// The compile-time check below fails when an op of enum ggml_op has no row or rows are out of
// order, so adding an op without describing it does not build.
#include "ggml-backward.h"

#define ROW(OP, symbol, n_src, flags, backward) { GGML_OP_##OP, #OP, symbol, n_src, flags, backward }
#define RULE(name) ggml_backward_##name

enum { VIEW = GGML_OP_FLAG_VIEW, IN_PLACE = GGML_OP_FLAG_IN_PLACE, NO_GRAD = GGML_OP_FLAG_NO_GRAD };

static constexpr ggml_op_info op_table[] = {
    ROW(NONE,                    "none",                     0, 0,        nullptr),
    ROW(DUP,                     "x",                        1, 0,        RULE(dup)),
    ROW(ADD,                     "x+y",                      2, IN_PLACE, RULE(add)),
    ROW(ADD1,                    "x+y",                      2, IN_PLACE, RULE(add1)),
    ROW(SUB,                     "x-y",                      2, IN_PLACE, RULE(sub)),
    ROW(MUL,                     "x*y",                      2, IN_PLACE, RULE(mul)),
    ROW(DIV,                     "x/y",                      2, IN_PLACE, RULE(div)),
    ROW(SQR,                     "x^2",                      1, IN_PLACE, RULE(sqr)),
    ROW(SQRT,                    "√x",                       1, IN_PLACE, RULE(sqrt)),
    ROW(LOG,                     "log(x)",                   1, IN_PLACE, RULE(log)),
    ROW(SUM,                     "Σx",                       1, 0,        RULE(sum)),
    ROW(SUM_ROWS,                "Σx_k",                     1, 0,        RULE(sum_rows)),
    ROW(MEAN,                    "Σx/n",                     1, 0,        RULE(mean)),
    ROW(ARGMAX,                  "argmax(x)",                1, NO_GRAD,  nullptr),
    ROW(ARGSORT,                 "argsort(x)",               1, NO_GRAD,  nullptr),
    ROW(REPEAT,                  "repeat(x)",                1, 0,        RULE(repeat)),
    ROW(CONCAT,                  "concat(x, y)",             2, 0,        RULE(concat)),
    ROW(NORM,                    "norm(x)",                  1, 0,        RULE(norm)),
    ROW(RMS_NORM,                "rms_norm(x)",              1, 0,        RULE(rms_norm)),
    ROW(MUL_MAT,                 "X*Y",                      2, 0,        RULE(mul_mat)),
    ROW(MUL_MAT_ID,              "X[i]*Y",                   3, 0,        RULE(mul_mat_id)),
    ROW(OUT_PROD,                "X×Y",                      2, 0,        RULE(out_prod)),
    ROW(SCALE,                   "x*v",                      1, IN_PLACE, RULE(scale)),
    ROW(CPY,                     "x-\\>y",                   2, 0,        RULE(cpy)),
    ROW(CONT,                    "cont(x)",                  1, 0,        RULE(cont)),
    ROW(RESHAPE,                 "reshape(x)",               1, VIEW,     RULE(reshape)),
    ROW(VIEW,                    "view(x)",                  1, VIEW,     RULE(view)),
    ROW(PERMUTE,                 "permute(x)",               1, VIEW,     RULE(permute)),
    ROW(TRANSPOSE,               "transpose(x)",             1, VIEW,     RULE(transpose)),
    ROW(GET_ROWS,                "get_rows(x)",              2, 0,        RULE(get_rows)),
    ROW(SET_ROWS,                "set_rows(x)",              3, 0,        RULE(set_rows)),
    ROW(DIAG_MASK_INF,           "diag_mask_inf(x)",         1, IN_PLACE, RULE(diag_mask_inf)),
    ROW(SOFT_MAX,                "soft_max(x)",              2, 0,        RULE(soft_max)),
    ROW(ROPE,                    "rope(x)",                  3, 0,        RULE(rope)),
    ROW(FLASH_ATTN_EXT,          "flash_attn_ext(q,k,v)",    4, 0,        RULE(flash_attn_ext)),
    ROW(UNARY,                   "unary(x)",                 1, IN_PLACE, RULE(unary)),
    ROW(CROSS_ENTROPY_LOSS,      "cross_entropy_loss(x,y)",  2, 0,        RULE(cross_entropy_loss)),
    ROW(ACC,                     "x+=y",                     2, 0,        RULE(acc)),
    ROW(REPEAT_BACK,             "repeat_back(x)",           1, 0,        RULE(repeat_back)),
    ROW(UNARY_BACK,              "unary_back(x)",            2, 0,        nullptr),
    ROW(NORM_BACK,               "norm_back(x)",             2, 0,        nullptr),
    ROW(RMS_NORM_BACK,           "rms_norm_back(x)",         2, 0,        nullptr),
    ROW(DIAG_MASK_ZERO,          "diag_mask_zero(x)",        1, IN_PLACE, RULE(diag_mask_inf)),
    ROW(SOFT_MAX_BACK,           "soft_max_back(x)",         2, 0,        nullptr),
    ROW(ROPE_BACK,               "rope_back(x)",             3, 0,        nullptr),
    ROW(GET_ROWS_BACK,           "get_rows_back(x)",         2, 0,        nullptr),
    ROW(MUL_MAT_ID_BACK,         "X[i]^T*dY",                3, 0,        nullptr),
    ROW(FLASH_ATTN_BACK,         "flash_attn_back(q,k,v)",   5, 0,        nullptr),
    ROW(CROSS_ENTROPY_LOSS_BACK, "cross_entropy_loss_back",  3, 0,        nullptr),
    ROW(OPT_STEP_ADAMW,          "adamw(x)",                 5, NO_GRAD,  nullptr),
    ROW(OPT_STEP_SGD,            "sgd(x)",                   3, NO_GRAD,  nullptr),
};

static constexpr bool table_covers_enum() {
    if (sizeof(op_table) / sizeof(op_table[0]) != GGML_OP_COUNT) return false;
    for (int i = 0; i < GGML_OP_COUNT; i++) {
        if (op_table[i].op != i || op_table[i].n_src > GGML_MAX_SRC) return false;
    }
    return true;
}
static_assert(table_covers_enum(), "the op table needs exactly one row per enum ggml_op, in enum order");

const struct ggml_op_info * ggml_op_get_info(enum ggml_op op) {
    GGML_ASSERT(op >= 0 && op < GGML_OP_COUNT);
    return &op_table[op];
}

const char * ggml_op_name(enum ggml_op op) { return op >= 0 && op < GGML_OP_COUNT ? op_table[op].name : "?"; }
const char * ggml_op_symbol(enum ggml_op op) { return op >= 0 && op < GGML_OP_COUNT ? op_table[op].symbol : "?"; }
bool ggml_op_is_view(enum ggml_op op) { return (ggml_op_get_info(op)->flags & GGML_OP_FLAG_VIEW) != 0; }
