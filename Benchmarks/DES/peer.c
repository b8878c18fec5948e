/* The C peer: OpenSSL 3's DES-ECB (legacy provider), the same 13-byte name sealed and opened per query. */
#include <openssl/evp.h>
#include <openssl/provider.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 100000;
    OSSL_PROVIDER_load(NULL, "legacy"); OSSL_PROVIDER_load(NULL, "default");
    EVP_CIPHER *cipher = EVP_CIPHER_fetch(NULL, "DES-ECB", NULL);
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    const unsigned char key[] = "dnspodpa", name[] = "www.dnspod.cn";
    unsigned char out[64], back[64]; int a, b, l; long sink = 0;
    struct timespec t0, t1; clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < n; i++) {
        EVP_EncryptInit_ex2(ctx, cipher, key, NULL, NULL);
        EVP_EncryptUpdate(ctx, out, &a, name, 13); EVP_EncryptFinal_ex(ctx, out + a, &l); a += l;
        EVP_DecryptInit_ex2(ctx, cipher, key, NULL, NULL);
        EVP_DecryptUpdate(ctx, back, &b, out, a); EVP_DecryptFinal_ex(ctx, back + b, &l); b += l;
        sink += b;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("peer (OpenSSL 3 EVP): %d seal+open in %.3f s = %.2f µs each (sink %ld, %02x%02x…)\n", n, s, s / n * 1e6, sink, out[0], out[1]);
    return 0;
}
