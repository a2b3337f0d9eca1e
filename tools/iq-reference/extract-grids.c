// Derives the IQ grids from llama.cpp's decoder: one block per grid index, d = 1, decoded.
#include "ggml.h"
#include <stdio.h>
#include <string.h>
#include <stdint.h>
static float dq[256];
static void decode(enum ggml_type t, const void * blk) { ggml_get_type_traits(t)->to_float(blk, dq, 256); }
int main(void) { struct ggml_init_params ip = {1024, NULL, false}; ggml_free(ggml_init(ip));
    uint8_t b[256];
    ggml_fp16_t one = ggml_fp32_to_fp16(1.0f);
    // iq2_xxs: d, qs[32] u16; sub-block 0: aux8[0] = index, aux32[1]=0 -> scale 0 -> db = 0.125
    printf("iq2xxs");
    for (int i = 0; i < 256; i++) { memset(b,0,sizeof b); memcpy(b,&one,2); b[2]=i; decode(GGML_TYPE_IQ2_XXS,b);
        for (int j=0;j<8;j++) printf(" %g", dq[j]/0.125f); } printf("\n");
    // iq2_xs: qs[0] u16 = index (9 bits), scales 0 -> 0.125
    printf("iq2xs");
    for (int i = 0; i < 512; i++) { memset(b,0,sizeof b); memcpy(b,&one,2); uint16_t v=i; memcpy(b+2,&v,2); decode(GGML_TYPE_IQ2_XS,b);
        for (int j=0;j<8;j++) printf(" %g", dq[j]/0.125f); } printf("\n");
    // iq2_s: qs[0]=low 8, qh[0] bits 0-1 = high; layout d, qs[64], qh[8], scales[8]
    printf("iq2s");
    for (int i = 0; i < 1024; i++) { memset(b,0,sizeof b); memcpy(b,&one,2); b[2]=i&255; b[2+64]=i>>8; decode(GGML_TYPE_IQ2_S,b);
        for (int j=0;j<8;j++) printf(" %g", dq[j]/0.125f); } printf("\n");
    // iq3_xxs: qs[0] index; scale 0 -> db = 0.5
    printf("iq3xxs");
    for (int i = 0; i < 256; i++) { memset(b,0,sizeof b); memcpy(b,&one,2); b[2]=i; decode(GGML_TYPE_IQ3_XXS,b);
        for (int j=0;j<4;j++) printf(" %g", dq[j]/0.5f); } printf("\n");
    // iq3_s: qs[0] low 8, qh[0] bit 0 high; scales 0 -> db = 1
    printf("iq3s");
    for (int i = 0; i < 512; i++) { memset(b,0,sizeof b); memcpy(b,&one,2); b[2]=i&255; b[2+64]=i>>8; decode(GGML_TYPE_IQ3_S,b);
        for (int j=0;j<4;j++) printf(" %g", dq[j]); } printf("\n");
    // iq1_s: d, qs[32], qh[8] u16: qh bits 0-2 high index, scale 0 -> dl = 1, delta +0.125
    printf("iq1s");
    for (int i = 0; i < 2048; i++) { memset(b,0,sizeof b); memcpy(b,&one,2); b[2]=i&255; uint16_t h=i>>8; memcpy(b+2+32,&h,2); decode(GGML_TYPE_IQ1_S,b);
        for (int j=0;j<8;j++) printf(" %g", dq[j]-0.125f); } printf("\n");
    return 0;
}
