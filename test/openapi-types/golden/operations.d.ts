export interface paths {
    "/api/me/databases": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get: operations["listMyDatabases"];
        put?: never;
        post: operations["createMyDatabase"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/me/databases/{id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        post?: never;
        delete: operations["deleteMyDatabase"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/me/dns": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        post: operations["createMyDnsRecord"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/auth/login": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        post: operations["login"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/auth/login/{provider}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get: operations["oauthLogin"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/users": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get: operations["listUsers"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/ai/generate": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        post: operations["generate"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/ai/v1/chat/completions": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        post: operations["chatCompletions"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/healthz": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get: operations["healthz"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/metrics": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get: operations["metrics"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
}
export type webhooks = Record<string, never>;
export interface components {
    schemas: {
        EnvelopeListDatabasesItem: {
            data: components["schemas"]["DatabasesItem"][] | null;
            message: string;
            success: boolean;
        };
        DatabasesItem: {
            createdAt: string;
            databaseInstanceId: number;
            databaseName: string;
            databaseUser: string;
            engine: "postgres" | "mysql";
            errorMessage?: string;
            host: string;
            lastActivity: string | null;
            maxSpaceBytes: number;
            name: string;
            port: number;
            purgeAt?: string;
            readOnly: boolean;
            readOnlyReason?: string;
            rotationDays: number;
            status: "Provisioning" | "Active" | "Pausing" | "Paused" | "Resuming" | "Failed" | "Deleting" | "Deleted" | "Restoring";
            usedSpaceBytes: number;
            userId: number;
        };
        Error: {
            data: unknown;
            errors?: components["schemas"]["FieldError"][] | null;
            message: string;
            success: boolean;
        };
        FieldError: {
            field: string;
            message: string;
        };
        CreateInputBody: {
            engine?: "postgres" | "mysql";
            name?: string;
            rotationDays?: number;
        } & {
            [key: string]: unknown;
        };
        EnvelopeDatabasesItem: {
            data: components["schemas"]["DatabasesItem"];
            message: string;
            success: boolean;
        };
        DnsRecordBody: {
            content?: string;
            label: string;
            proxied?: boolean;
            recordTtl?: number;
        } & {
            [key: string]: unknown;
        };
        EnvelopeDnsView: {
            data: components["schemas"]["DnsView"];
            message: string;
            success: boolean;
        };
        DnsView: {
            content: string;
            createdAt: string;
            errorMessage: string;
            fqdn: string;
            id: number;
            label: string;
            providerRecordId: string;
            proxied: boolean;
            recordTtl: number;
            status: "Pending" | "Active" | "Failed" | "Revoking" | "Revoked";
            updatedAt: string;
            userId: number;
        };
        LoginInputBody: {
            email: string;
            password: string;
        } & {
            [key: string]: unknown;
        };
        EnvelopeAuthLoginResult: {
            data: components["schemas"]["AuthLoginResult"];
            message: string;
            success: boolean;
        };
        AuthLoginResult: {
            accessToken?: string;
            expiresAt?: string;
            mfaExpiresAt?: string;
            mfaRequired: boolean;
            mfaToken?: string;
            provider?: string;
            refreshExpiresAt?: string;
            refreshToken?: string;
            sessionId?: number;
            token?: string;
            tokenType?: string;
            user?: components["schemas"]["AuthUserView"];
            userId?: number;
        };
        AuthUserView: {
            createdAt: string;
            email: string;
            readonly emailVerified: boolean;
            id: number;
            name: string;
            organization: string;
            provider: string;
            providerUserId: string;
            role: "User" | "Admin";
        };
        EnvelopePageAdminUser: {
            data: components["schemas"]["PageAdminUser"];
            message: string;
            success: boolean;
        };
        PageAdminUser: {
            items: components["schemas"]["AdminUser"][] | null;
            page: number;
            pageSize: number;
            totalCount: number;
            totalCountExact: boolean;
        };
        AdminUser: {
            aiMonthlyTokenBudget: number | null;
            createdAt: string;
            email: string;
            readonly emailVerified: boolean;
            fullName: string;
            hasPassword: boolean;
            id: number;
            name: string;
            organization: string;
            role: "User" | "Admin";
            updatedAt: string;
        };
        AikeysGenerateInput: {
            maxTokens?: number;
            model?: string;
            prompt: string;
            system?: string;
            temperature?: number;
        };
        EnvelopeAikeysGeneration: {
            data: components["schemas"]["AikeysGeneration"];
            message: string;
            success: boolean;
        };
        AikeysGeneration: {
            finishReason: string;
            model: string;
            text: string;
            usage: components["schemas"]["AikeysTokenUsage"];
        };
        AikeysTokenUsage: {
            completionTokens: number;
            promptTokens: number;
            totalTokens: number;
        };
        AikeysOpenAIErrorDoc: {
            error: components["schemas"]["AikeysOpenAIErrorObject"];
        };
        AikeysOpenAIErrorObject: {
            code: string | null;
            message: string;
            param: string | null;
            type: string;
        };
        EnvelopeHealth: {
            data: components["schemas"]["Health"];
            message: string;
            success: boolean;
        };
        Health: {
            checks?: components["schemas"]["Checks"];
            status: "ok" | "unavailable";
        };
        Checks: {
            database: "ok" | "down";
            redis: "ok" | "down" | "disabled";
        };
    };
    responses: {
        302: {
            headers: {
                "Cache-Control"?: string;
                Location?: string;
                RateLimit: components["headers"]["RateLimit"];
                "RateLimit-Policy": components["headers"]["Policy"];
                "Set-Cookie"?: string;
                "X-RateLimit-Limit": components["headers"]["Limit"];
                "X-RateLimit-Remaining": components["headers"]["Remaining"];
                "X-RateLimit-Reset": components["headers"]["Reset"];
                [name: string]: unknown;
            };
            content?: never;
        };
        400: {
            headers: {
                RateLimit?: string;
                "RateLimit-Policy"?: string;
                "X-RateLimit-Limit"?: number;
                "X-RateLimit-Remaining"?: number;
                "X-RateLimit-Reset"?: number;
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
        401: {
            headers: {
                RateLimit?: string;
                "RateLimit-Policy"?: string;
                "WWW-Authenticate"?: string;
                "X-RateLimit-Limit"?: number;
                "X-RateLimit-Remaining"?: number;
                "X-RateLimit-Reset"?: number;
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
        403: {
            headers: {
                RateLimit?: string;
                "RateLimit-Policy"?: string;
                "X-RateLimit-Limit"?: number;
                "X-RateLimit-Remaining"?: number;
                "X-RateLimit-Reset"?: number;
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
        404: {
            headers: {
                RateLimit?: string;
                "RateLimit-Policy"?: string;
                "X-RateLimit-Limit"?: number;
                "X-RateLimit-Remaining"?: number;
                "X-RateLimit-Reset"?: number;
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
        409: {
            headers: {
                RateLimit?: string;
                "RateLimit-Policy"?: string;
                "X-RateLimit-Limit"?: number;
                "X-RateLimit-Remaining"?: number;
                "X-RateLimit-Reset"?: number;
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
        413: {
            headers: {
                RateLimit?: string;
                "RateLimit-Policy"?: string;
                "X-RateLimit-Limit"?: number;
                "X-RateLimit-Remaining"?: number;
                "X-RateLimit-Reset"?: number;
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
        415: {
            headers: {
                RateLimit?: string;
                "RateLimit-Policy"?: string;
                "X-RateLimit-Limit"?: number;
                "X-RateLimit-Remaining"?: number;
                "X-RateLimit-Reset"?: number;
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
        422: {
            headers: {
                RateLimit?: string;
                "RateLimit-Policy"?: string;
                "X-RateLimit-Limit"?: number;
                "X-RateLimit-Remaining"?: number;
                "X-RateLimit-Reset"?: number;
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
        429: {
            headers: {
                RateLimit?: string;
                "RateLimit-Policy"?: string;
                "Retry-After": components["headers"]["Retry-After"];
                "X-RateLimit-Limit"?: number;
                "X-RateLimit-Remaining"?: number;
                "X-RateLimit-Reset"?: number;
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
        500: {
            headers: {
                RateLimit?: string;
                "RateLimit-Policy"?: string;
                "X-RateLimit-Limit"?: number;
                "X-RateLimit-Remaining"?: number;
                "X-RateLimit-Reset"?: number;
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
        502: {
            headers: {
                RateLimit?: string;
                "RateLimit-Policy"?: string;
                "Retry-After"?: number;
                "X-RateLimit-Limit"?: number;
                "X-RateLimit-Remaining"?: number;
                "X-RateLimit-Reset"?: number;
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
        503: {
            headers: {
                RateLimit?: string;
                "RateLimit-Policy"?: string;
                "Retry-After"?: number;
                "X-RateLimit-Limit"?: number;
                "X-RateLimit-Remaining"?: number;
                "X-RateLimit-Reset"?: number;
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
        "EnvelopeDatabasesItem.Created": {
            headers: {
                RateLimit: components["headers"]["RateLimit"];
                "RateLimit-Policy": components["headers"]["Policy"];
                "X-RateLimit-Limit": components["headers"]["Limit"];
                "X-RateLimit-Remaining": components["headers"]["Remaining"];
                "X-RateLimit-Reset": components["headers"]["Reset"];
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["EnvelopeDatabasesItem"];
            };
        };
        EnvelopeDatabasesItem: {
            headers: {
                RateLimit: components["headers"]["RateLimit"];
                "RateLimit-Policy": components["headers"]["Policy"];
                "X-RateLimit-Limit": components["headers"]["Limit"];
                "X-RateLimit-Remaining": components["headers"]["Remaining"];
                "X-RateLimit-Reset": components["headers"]["Reset"];
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["EnvelopeDatabasesItem"];
            };
        };
        "EnvelopeDnsView.Created": {
            headers: {
                RateLimit: components["headers"]["RateLimit"];
                "RateLimit-Policy": components["headers"]["Policy"];
                "X-RateLimit-Limit": components["headers"]["Limit"];
                "X-RateLimit-Remaining": components["headers"]["Remaining"];
                "X-RateLimit-Reset": components["headers"]["Reset"];
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["EnvelopeDnsView"];
            };
        };
        "401.completeMfa": {
            headers: {
                RateLimit?: string;
                "RateLimit-Policy"?: string;
                "X-RateLimit-Limit"?: number;
                "X-RateLimit-Remaining"?: number;
                "X-RateLimit-Reset"?: number;
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
        AikeysOpenAIErrorDoc: {
            headers: {
                RateLimit?: string;
                "RateLimit-Policy"?: string;
                "X-RateLimit-Limit"?: number;
                "X-RateLimit-Remaining"?: number;
                "X-RateLimit-Reset"?: number;
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["AikeysOpenAIErrorDoc"];
            };
        };
        EnvelopeHealth: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["EnvelopeHealth"];
            };
        };
        "400.healthz": {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
        "413.healthz": {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
        "415.healthz": {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
        "500.healthz": {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
        "503.healthz": {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
    };
    parameters: {
        "Idempotency-Key": string;
        "id.deleteAccessCredential": number;
        page: number;
        pageSize: number;
    };
    requestBodies: never;
    headers: {
        RateLimit: string;
        Policy: string;
        Limit: number;
        Remaining: number;
        Reset: number;
        "Retry-After": number;
        "Retry-After.chatCompletions": number;
    };
    pathItems: never;
}
export type $defs = Record<string, never>;
export interface operations {
    listMyDatabases: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            200: {
                headers: {
                    RateLimit: components["headers"]["RateLimit"];
                    "RateLimit-Policy": components["headers"]["Policy"];
                    "X-RateLimit-Limit": components["headers"]["Limit"];
                    "X-RateLimit-Remaining": components["headers"]["Remaining"];
                    "X-RateLimit-Reset": components["headers"]["Reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["EnvelopeListDatabasesItem"];
                };
            };
            400: components["responses"]["400"];
            401: components["responses"]["401"];
            413: components["responses"]["413"];
            415: components["responses"]["415"];
            429: components["responses"]["429"];
            500: components["responses"]["500"];
            503: components["responses"]["503"];
        };
    };
    createMyDatabase: {
        parameters: {
            query?: never;
            header?: {
                "Idempotency-Key"?: components["parameters"]["Idempotency-Key"];
            };
            path?: never;
            cookie?: never;
        };
        requestBody?: {
            content: {
                "application/json": components["schemas"]["CreateInputBody"];
            };
        };
        responses: {
            201: components["responses"]["EnvelopeDatabasesItem.Created"];
            400: components["responses"]["400"];
            401: components["responses"]["401"];
            409: components["responses"]["409"];
            413: components["responses"]["413"];
            415: components["responses"]["415"];
            422: components["responses"]["422"];
            429: components["responses"]["429"];
            500: components["responses"]["500"];
            502: components["responses"]["502"];
            503: components["responses"]["503"];
        };
    };
    deleteMyDatabase: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                id: components["parameters"]["id.deleteAccessCredential"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            200: components["responses"]["EnvelopeDatabasesItem"];
            400: components["responses"]["400"];
            401: components["responses"]["401"];
            404: components["responses"]["404"];
            409: components["responses"]["409"];
            413: components["responses"]["413"];
            415: components["responses"]["415"];
            429: components["responses"]["429"];
            500: components["responses"]["500"];
            502: components["responses"]["502"];
            503: components["responses"]["503"];
        };
    };
    createMyDnsRecord: {
        parameters: {
            query?: never;
            header?: {
                "Idempotency-Key"?: components["parameters"]["Idempotency-Key"];
            };
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["DnsRecordBody"];
            };
        };
        responses: {
            201: components["responses"]["EnvelopeDnsView.Created"];
            400: components["responses"]["400"];
            401: components["responses"]["401"];
            409: components["responses"]["409"];
            413: components["responses"]["413"];
            415: components["responses"]["415"];
            422: components["responses"]["422"];
            429: components["responses"]["429"];
            500: components["responses"]["500"];
            502: components["responses"]["502"];
            503: components["responses"]["503"];
        };
    };
    login: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["LoginInputBody"];
            };
        };
        responses: {
            200: {
                headers: {
                    RateLimit: components["headers"]["RateLimit"];
                    "RateLimit-Policy": components["headers"]["Policy"];
                    "X-RateLimit-Limit": components["headers"]["Limit"];
                    "X-RateLimit-Remaining": components["headers"]["Remaining"];
                    "X-RateLimit-Reset": components["headers"]["Reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["EnvelopeAuthLoginResult"];
                };
            };
            400: components["responses"]["400"];
            401: components["responses"]["401.completeMfa"];
            413: components["responses"]["413"];
            415: components["responses"]["415"];
            429: components["responses"]["429"];
            500: components["responses"]["500"];
            503: components["responses"]["503"];
        };
    };
    oauthLogin: {
        parameters: {
            query?: {
                returnUrl?: string;
            };
            header?: never;
            path: {
                provider: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            302: components["responses"]["302"];
            400: components["responses"]["400"];
            404: components["responses"]["404"];
            413: components["responses"]["413"];
            415: components["responses"]["415"];
            429: components["responses"]["429"];
            500: components["responses"]["500"];
            503: components["responses"]["503"];
        };
    };
    listUsers: {
        parameters: {
            query?: {
                page?: components["parameters"]["page"];
                pageSize?: components["parameters"]["pageSize"];
                search?: string;
                role?: "User" | "Admin";
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            200: {
                headers: {
                    RateLimit: components["headers"]["RateLimit"];
                    "RateLimit-Policy": components["headers"]["Policy"];
                    "X-RateLimit-Limit": components["headers"]["Limit"];
                    "X-RateLimit-Remaining": components["headers"]["Remaining"];
                    "X-RateLimit-Reset": components["headers"]["Reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["EnvelopePageAdminUser"];
                };
            };
            400: components["responses"]["400"];
            401: components["responses"]["401"];
            403: components["responses"]["403"];
            413: components["responses"]["413"];
            415: components["responses"]["415"];
            429: components["responses"]["429"];
            500: components["responses"]["500"];
            503: components["responses"]["503"];
        };
    };
    generate: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["AikeysGenerateInput"];
            };
        };
        responses: {
            200: {
                headers: {
                    RateLimit: components["headers"]["RateLimit"];
                    "RateLimit-Policy": components["headers"]["Policy"];
                    "X-RateLimit-Limit": components["headers"]["Limit"];
                    "X-RateLimit-Remaining": components["headers"]["Remaining"];
                    "X-RateLimit-Reset": components["headers"]["Reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["EnvelopeAikeysGeneration"];
                };
            };
            400: components["responses"]["400"];
            401: components["responses"]["401.completeMfa"];
            413: components["responses"]["413"];
            415: components["responses"]["415"];
            429: {
                headers: {
                    RateLimit?: string;
                    "RateLimit-Policy"?: string;
                    "Retry-After": components["headers"]["Retry-After.chatCompletions"];
                    "X-RateLimit-Limit"?: number;
                    "X-RateLimit-Remaining"?: number;
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            500: components["responses"]["500"];
            502: {
                headers: {
                    RateLimit?: string;
                    "RateLimit-Policy"?: string;
                    "X-RateLimit-Limit"?: number;
                    "X-RateLimit-Remaining"?: number;
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            503: components["responses"]["503"];
        };
    };
    chatCompletions: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    messages: Record<string, never>[];
                    model?: string;
                    stream?: boolean;
                };
            };
        };
        responses: {
            200: {
                headers: {
                    RateLimit: components["headers"]["RateLimit"];
                    "RateLimit-Policy": components["headers"]["Policy"];
                    "X-RateLimit-Limit": components["headers"]["Limit"];
                    "X-RateLimit-Remaining": components["headers"]["Remaining"];
                    "X-RateLimit-Reset": components["headers"]["Reset"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": Record<string, never>;
                    "text/event-stream": string;
                };
            };
            400: components["responses"]["AikeysOpenAIErrorDoc"];
            401: components["responses"]["AikeysOpenAIErrorDoc"];
            404: components["responses"]["AikeysOpenAIErrorDoc"];
            409: components["responses"]["AikeysOpenAIErrorDoc"];
            413: components["responses"]["AikeysOpenAIErrorDoc"];
            415: components["responses"]["AikeysOpenAIErrorDoc"];
            422: components["responses"]["AikeysOpenAIErrorDoc"];
            429: {
                headers: {
                    RateLimit?: string;
                    "RateLimit-Policy"?: string;
                    "Retry-After": components["headers"]["Retry-After.chatCompletions"];
                    "X-RateLimit-Limit"?: number;
                    "X-RateLimit-Remaining"?: number;
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["AikeysOpenAIErrorDoc"];
                };
            };
            500: components["responses"]["AikeysOpenAIErrorDoc"];
            502: components["responses"]["AikeysOpenAIErrorDoc"];
            503: components["responses"]["AikeysOpenAIErrorDoc"];
        };
    };
    healthz: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            200: components["responses"]["EnvelopeHealth"];
            400: components["responses"]["400.healthz"];
            413: components["responses"]["413.healthz"];
            415: components["responses"]["415.healthz"];
            500: components["responses"]["500.healthz"];
            503: components["responses"]["503.healthz"];
        };
    };
    metrics: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "text/plain": string;
                };
            };
            400: components["responses"]["400.healthz"];
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            413: components["responses"]["413.healthz"];
            415: components["responses"]["415.healthz"];
        };
    };
}
